package restsubmit

import (
	"context"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// Chained returns the Backend of a master: its endpoints taken through ch,
// so that every decision is the one the /v1 API makes.
func Chained(ch *service.Chain) Backend { return chained{ch} }

type chained struct{ ch *service.Chain }

func (b chained) SubmitDriver(ctx context.Context, c auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error) {
	return service.V1SubmitDriver.Call(ctx, b.ch, c, service.Request[api.SubmitRequest]{Body: req})
}

func (b chained) Driver(ctx context.Context, c auth.Caller, id string, r service.Read) (*model.Driver, error) {
	return service.V1Driver.Call(ctx, b.ch, c, service.Request[api.NoBody]{ID: id, Read: r})
}

func (b chained) KillDriver(ctx context.Context, c auth.Caller, id string) (api.KillResponse, error) {
	return service.V1KillDriver.Call(ctx, b.ch, c, service.Request[api.NoBody]{ID: id})
}

func (b chained) KillAllDrivers(ctx context.Context, c auth.Caller) (api.KillAllResponse, error) {
	return service.V1KillAllDrivers.Call(ctx, b.ch, c, service.Request[api.NoBody]{})
}

func (b chained) ClearCompleted(ctx context.Context, c auth.Caller) (api.ClearCompletedResponse, error) {
	return service.V1ClearCompleted.Call(ctx, b.ch, c, service.Request[api.NoBody]{})
}

func (b chained) Worker(ctx context.Context, c auth.Caller, id string, _ service.Read) (*model.Worker, error) {
	return service.Worker.Call(ctx, b.ch, c, service.Request[api.NoBody]{ID: id})
}

func (b chained) Health(ctx context.Context) api.Health {
	hl, _ := service.V1Health.Call(ctx, b.ch, auth.Caller{}, service.Request[api.NoBody]{})
	return hl
}
