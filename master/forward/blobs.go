package forward

import (
	"context"
	"io"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/security/auth"
)

// Upload is this master's own: every master keeps a store, and the one an
// upload reaches pushes it to the other voters itself.
func (f *Forwarder) Upload(ctx context.Context, c auth.Caller, sum string, size int64, body io.Reader) (api.UploadResponse, error) {
	return f.local.Upload(ctx, c, sum, size, body)
}

// Blob is served from this master's own store.
func (f *Forwarder) Blob(ctx context.Context, c auth.Caller, sum string) (*service.Blob, error) {
	return f.local.Blob(ctx, c, sum)
}
