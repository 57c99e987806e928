package gateway

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/approvalweb"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/nats-io/nats.go"
)

// approvalsPage is the /approvals page, when operator approvals are on
// and approvers can sign in to it: with approvals.approvers' tokens, or at
// the gateway's authorization server (approvals.web). resource is the
// gateway's URL of /mcp under OAuth, which names the page's callback.
func approvalsPage(cfg *config.Config, nc *nats.Conn, resource string, pol *policy.Policy, lookupEnv func(string) (string, bool), log *slog.Logger) (*approvalweb.Page, error) {
	a := cfg.Approvals
	if a == nil || !a.Operator || (!slices.ContainsFunc(a.Approvers, func(ap config.Approver) bool { return ap.TokenEnv != "" }) && a.Web == nil) {
		return nil, nil
	}
	pc := approvalweb.Config{NATS: nc, Logger: log}
	if a.SigningKey != "" {
		seed, err := os.ReadFile(a.SigningKey)
		if err != nil {
			return nil, fmt.Errorf("%s: approvals.signing_key: %w", cfg.File, err)
		}
		if pc.Signer, err = approval.ParseSigner(seed); err != nil {
			return nil, fmt.Errorf("%s: approvals.signing_key %s: %w", cfg.File, a.SigningKey, err)
		}
	}
	for i, ap := range a.Approvers {
		if ap.TokenEnv == "" {
			// An approver who signs answers over NATS only.
			continue
		}
		v, ok := lookupEnv(ap.TokenEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%s: approvals.approvers[%d].token_env names %s, which is not set: export it with %s's token", cfg.File, i, ap.TokenEnv, ap.Name)
		}
		pc.Tokens = append(pc.Tokens, approvalweb.Token{Name: ap.Name, Token: strings.TrimSpace(v)})
	}
	if w := a.Web; w != nil {
		secret := ""
		if w.ClientSecretEnv != "" {
			v, ok := lookupEnv(w.ClientSecretEnv)
			if !ok || strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("%s: approvals.web.client_secret_env names %s, which is not set", cfg.File, w.ClientSecretEnv)
			}
			secret = strings.TrimSpace(v)
		}
		m := cfg.Expose.Agent.MCP
		pc.OIDC = &approvalweb.OIDC{
			Issuer:       m.Auth.Issuer,
			ClientID:     w.ClientID,
			ClientSecret: secret,
			RedirectURL:  strings.TrimSuffix(strings.TrimSuffix(resource, "/"), "/mcp") + "/approvals/callback",
			Policy:       pol,
			Algorithms:   m.Auth.Algorithms,
		}
	}
	page, err := approvalweb.New(pc)
	if err != nil {
		return nil, fmt.Errorf("%s: approvals: %w", cfg.File, err)
	}
	log.Info("serving the approvals page", "agent", cfg.Identity, "path", "/approvals")
	return page, nil
}
