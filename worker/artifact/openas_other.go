//go:build !linux

package artifact

import (
	"context"
	"errors"
	"os"
)

// openAs refuses: only Linux gives a thread another user's file-system
// rights (setfsuid), and a staging for a program run as another user
// must not read with the runner's.
func openAs(context.Context, string, Owner) (*os.File, error) {
	return nil, errors.New("reading a file:// artifact as the program's user needs Linux")
}
