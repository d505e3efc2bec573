package api

import (
	"errors"
	"fmt"
	"testing"

	"github.com/drover-project/drover/model"
)

// Every code survives the trip over HTTP: the error a master returns, its
// code and status, and the error the far side decodes wrap one sentinel.
func TestCodesRoundTrip(t *testing.T) {
	// The general sentinels: each stands for its status alone.
	own := map[error]bool{ErrInvalidRequest: true, ErrUnauthenticated: true, ErrForbidden: true, ErrNotFound: true, ErrMethodNotAllowed: true, ErrConflict: true, ErrGone: true,
		ErrTooLarge: true, ErrUnsupportedMediaType: true, ErrMisdirected: true, ErrTooManyRequests: true, ErrNoStorage: true, ErrUnavailable: true, ErrBadGateway: true, ErrInternal: true}
	for i, c := range codes {
		if (i < apiCodes) == own[c.err] {
			t.Errorf("codes[%d] (%s) is on the wrong side of apiCodes", i, c.code)
		}
		err := fmt.Errorf("context: %w", c.err)
		code, status := CodeOf(err)
		if code != c.code || status != c.status {
			t.Errorf("CodeOf(%v) = %s %d, want %s %d", err, code, status, c.code, c.status)
		}
		back := Error{Error: err.Error(), Code: code}.Err(status)
		if back.Error() != err.Error() {
			t.Errorf("%s: message %q, want %q", code, back, err)
		}
		if code2, _ := CodeOf(back); code2 != code {
			t.Errorf("%s came back as %s", code, code2)
		}
		if c.err != model.ErrInvalidCommand && !errors.Is(back, c.err) {
			t.Errorf("%s: %v does not wrap %v", code, back, c.err)
		}
	}
	if code, status := CodeOf(errors.New("boom")); code != CodeInternal || status != 500 {
		t.Errorf("an error without a sentinel: %s %d", code, status)
	}
	if err := (Error{Error: "x", Code: "from_a_newer_master"}).Err(409); !errors.Is(err, ErrConflict) {
		t.Errorf("an unknown code with 409: %v", err)
	}
}
