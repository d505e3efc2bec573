package client

import (
	"context"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// Namespaces returns every namespace, `default` among them, by name, with
// what its work holds (read access; a linearizable read).
func (c *Client) Namespaces(ctx context.Context) ([]api.NamespaceStatus, error) {
	var out []api.NamespaceStatus
	return out, call(ctx, c, api.V1Namespaces, api.V1Namespaces.Pattern, api.NoBody{}, &out)
}

// Namespace returns namespace name's settings, use, queued and running
// drivers, fair share and preemptions. An unknown name is an *APIError
// wrapping model.ErrUnknownNamespace; a name that is no namespace's
// (model.CheckNamespace) is refused before any request, wrapping
// api.ErrInvalidRequest.
func (c *Client) Namespace(ctx context.Context, name string) (api.NamespaceStatus, error) {
	var out api.NamespaceStatus
	p, err := namespacePath(api.V1Namespace.Route, name)
	if err != nil {
		return out, err
	}
	return out, call(ctx, c, api.V1Namespace, p, api.NoBody{}, &out)
}

// ApplyNamespace creates namespace name, or replaces its settings, with
// req's (operator token; see api.NamespaceRequest for the defaults) and
// returns it as the leader then holds it. Applying the same settings again
// changes nothing but their time, so the request goes to every master as
// any write does.
func (c *Client) ApplyNamespace(ctx context.Context, name string, req api.NamespaceRequest) (api.NamespaceStatus, error) {
	var out api.NamespaceStatus
	p, err := namespacePath(api.V1ApplyNamespace.Route, name)
	if err != nil {
		return out, err
	}
	return out, call(ctx, c, api.V1ApplyNamespace, p, req, &out)
}

// DeleteNamespace deletes namespace name (operator token) and returns the
// settings it had. It is sent once, to the leader (toLeader): a copy
// arriving after the first would be refused as unknown. A namespace with
// drivers or apps that have not ended is an *APIError wrapping
// model.ErrNamespaceInUse.
func (c *Client) DeleteNamespace(ctx context.Context, name string) (*model.Namespace, error) {
	var out *model.Namespace
	p, err := namespacePath(api.V1DeleteNamespace.Route, name)
	if err != nil {
		return nil, err
	}
	return out, callLeader(ctx, c, api.V1DeleteNamespace, p, api.NoBody{}, &out)
}

// CreateACLToken creates an ACL token (operator token) and returns it with
// its secret, which no master can show again. It is sent once, to the
// leader: a copy would make a second token. When the answer is lost, the
// token may exist: ACLTokens lists it, RevokeACLToken drops it.
func (c *Client) CreateACLToken(ctx context.Context, req api.ACLTokenRequest) (api.ACLTokenCreated, error) {
	var out api.ACLTokenCreated
	return out, callLeader(ctx, c, api.V1CreateACLToken, api.V1CreateACLToken.Pattern, req, &out)
}

// ACLTokens returns every ACL token by accessor, without secrets or their
// hashes (operator token).
func (c *Client) ACLTokens(ctx context.Context) ([]*model.ACLToken, error) {
	var out []*model.ACLToken
	return out, call(ctx, c, api.V1ACLTokens, api.V1ACLTokens.Pattern, api.NoBody{}, &out)
}

// RevokeACLToken revokes the ACL token accessor (operator token) and
// returns it. It is sent once, to the leader, as DeleteNamespace is; an
// unknown accessor is an *APIError wrapping model.ErrUnknownToken.
func (c *Client) RevokeACLToken(ctx context.Context, accessor string) (*model.ACLToken, error) {
	var out *model.ACLToken
	return out, callLeader(ctx, c, api.V1RevokeACLToken, api.V1RevokeACLToken.Path(accessor), api.NoBody{}, &out)
}

// namespacePath is route's path naming namespace name, once name is a
// namespace's (model.CheckNamespace), as driverPath is for a driver.
func namespacePath(route api.Route, name string) (string, error) {
	if err := model.CheckNamespace(name); err != nil {
		return "", api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	return route.Path(name), nil
}
