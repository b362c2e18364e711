package testenv

import (
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/yaml"
)

// DexConfig renders the field names of Dex's cmd/dex/config.go at v2.45.1 (issuer,
// storage.type, web.https/tlsCert/tlsKey, telemetry.http, oauth2.passwordConnector,
// expiry.idTokens, enablePasswordDB, staticClients, staticPasswords with groups and
// emailVerified), and stores a bcrypt hash of each password, never the password. That
// Dex takes the file and signs users in with it, tests/signin proves.
func TestDexConfigRendersDexsFieldsAndHashesPasswords(t *testing.T) {
	cfg := DexConfig{
		Issuer: "https://dex.example", HTTPSAddress: "127.0.0.1:5554", TLSCert: "/tls/tls.crt", TLSKey: "/tls/tls.key",
		TelemetryAddress: "127.0.0.1:5558",
		Clients:          []DexClient{{ID: "railgrid", Secret: "s3cret", Name: "kcp"}},
		Users: []DexUser{
			{Email: "alice@example.com", Username: "alice", UserID: "a1", Password: "alice-pw", Groups: []string{"ops", "devs"}},
			{Email: "carol@example.com", Username: "carol", UserID: "c1", Password: "carol-pw", EmailUnverified: true},
		},
		IDTokenExpiry: 90 * time.Second,
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Issuer  string
		Storage struct{ Type string }
		Web     struct {
			HTTPS   string `json:"https"`
			TLSCert string `json:"tlsCert"`
			TLSKey  string `json:"tlsKey"`
		}
		Telemetry struct{ HTTP string }
		OAuth2    struct {
			PasswordConnector string `json:"passwordConnector"`
		} `json:"oauth2"`
		Expiry struct {
			IDTokens string `json:"idTokens"`
		}
		EnablePasswordDB bool `json:"enablePasswordDB"`
		StaticClients    []struct{ ID, Secret, Name string }
		StaticPasswords  []struct {
			Email, Hash, Username string
			UserID                string `json:"userID"`
			Groups                []string
			EmailVerified         *bool `json:"emailVerified"`
		} `json:"staticPasswords"`
	}
	if err := yaml.UnmarshalStrict(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Issuer != cfg.Issuer || got.Storage.Type != "memory" || got.Web.HTTPS != "127.0.0.1:5554" ||
		got.Web.TLSCert != "/tls/tls.crt" || got.Web.TLSKey != "/tls/tls.key" || got.Telemetry.HTTP != "127.0.0.1:5558" ||
		got.OAuth2.PasswordConnector != "local" || !got.EnablePasswordDB || got.Expiry.IDTokens != "1m30s" {
		t.Errorf("rendered:\n%s", out)
	}
	if len(got.StaticClients) != 1 || got.StaticClients[0].ID != "railgrid" || got.StaticClients[0].Secret != "s3cret" {
		t.Errorf("static clients %+v", got.StaticClients)
	}
	if len(got.StaticPasswords) != 2 {
		t.Fatalf("static passwords %+v", got.StaticPasswords)
	}
	for i, want := range cfg.Users {
		p := got.StaticPasswords[i]
		if p.Email != want.Email || p.Username != want.Username || p.UserID != want.UserID || len(p.Groups) != len(want.Groups) {
			t.Errorf("static password %d: %+v, want %+v", i, p, want)
		}
		if p.EmailVerified == nil || *p.EmailVerified == want.EmailUnverified {
			t.Errorf("%s: emailVerified %v, want %v", want.Email, p.EmailVerified, !want.EmailUnverified)
		}
		if err := bcrypt.CompareHashAndPassword([]byte(p.Hash), []byte(want.Password)); err != nil {
			t.Errorf("%s: the hash is not the password's: %v", want.Email, err)
		}
		if cost, err := bcrypt.Cost([]byte(p.Hash)); err != nil || cost < 10 {
			t.Errorf("%s: bcrypt cost %d (%v), Dex refuses less than 10", want.Email, cost, err)
		}
	}
}
