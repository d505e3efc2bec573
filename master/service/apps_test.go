package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// An app's executors run as the user it names or else its driver's; a
// driver token may name its own driver's user only, and a user of another
// form is refused whoever names it.
func TestAppUser(t *testing.T) {
	const driverID = "driver-20260101000000-0001"
	driver := auth.Caller{Identity: auth.Identity{Token: auth.DriverToken, DriverID: driverID, Attempt: 1}}
	submitter := auth.Caller{Identity: auth.Identity{Token: auth.SubmitToken}}
	etl, noUser := &model.Driver{ID: driverID, DriverSpec: model.DriverSpec{User: "etl"}}, &model.Driver{ID: driverID}
	for _, tc := range []struct {
		name   string
		c      auth.Caller
		d      *model.Driver
		user   string
		want   string
		err    error
		errHas string
	}{
		{"a driver's app, naming none", driver, etl, "", "etl", nil, ""},
		{"a driver's app, naming its own", driver, etl, "etl", "etl", nil, ""},
		{"a driver's app, naming another", driver, etl, "root", "", api.ErrForbidden, `driver's user, "etl", not "root"`},
		{"a driver without a user naming one", driver, noUser, "etl", "", api.ErrForbidden, `driver's user, each worker's default, not "etl"`},
		{"a submitter's app of a driver, naming another", submitter, etl, "spark", "spark", nil, ""},
		{"a submitter's app of a driver, naming none", submitter, etl, "", "etl", nil, ""},
		{"a submitter's app without a driver", submitter, nil, "", "", nil, ""},
		{"a submitter's app, naming a uid", submitter, nil, "0", "", api.ErrInvalidRequest, "numeric uid"},
		{"a driver's app, naming a bad form", driver, etl, "Etl", "", api.ErrInvalidRequest, "not a portable user name"},
	} {
		got, err := appUser(tc.c, api.RegisterAppRequest{DriverID: driverID, User: tc.user}, tc.d)
		if got != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("%s: %q %v, want %q %v with %q", tc.name, got, err, tc.want, tc.err, tc.errHas)
		}
	}
}
