package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"
)

// configSchema is the version of config.json this package writes.
const configSchema = 1

// Config is the class this workspace joined. The learner's token is kept in the file but never
// leaves this package: Config has no field for it, so printing a Config cannot leak it.
type Config struct {
	URL     string    // the class server, "https://host:port" (no trailing slash)
	Class   string    // the class's name
	Learner string    // the learner's id in the class
	Name    string    // the display name the server stored
	Joined  time.Time // when join succeeded

	token string
}

// String describes the class without the token.
func (c Config) String() string {
	return fmt.Sprintf("class %q at %s, learner %q (%s), joined %s", c.Class, c.URL, c.Name, c.Learner, c.Joined.Format(time.RFC3339))
}

// GoString is String, so that %#v does not print the token either.
func (c Config) GoString() string { return "client.Config{" + c.String() + "}" }

// configFile is config.json's form.
type configFile struct {
	Schema  int       `json:"schema"`
	URL     string    `json:"url"`
	Class   string    `json:"class"`
	Learner string    `json:"learner"`
	Name    string    `json:"name"`
	Token   string    `json:"token"`
	Joined  time.Time `json:"joined"`
}

// ErrNotJoined is returned (wrapped) when the workspace has joined no class.
var ErrNotJoined = errors.New("this workspace has not joined a class (mgpu-learn workshop join URL CODE)")

// Config reads the class this workspace joined. It returns ErrNotJoined when there is none,
// and an error naming the file when the file is unusable (the file is left as it is).
func (c *Client) Config() (*Config, error) {
	name := c.path(configName)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotJoined
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	var f configFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON (%v): join the class again ('mgpu-learn workshop leave', then 'join')", name, err)
	}
	switch {
	case f.Schema > configSchema:
		return nil, fmt.Errorf("%s was written by a newer mgpu-learn (schema %d; this one reads %d)", name, f.Schema, configSchema)
	case f.Schema < 1:
		return nil, fmt.Errorf("%s has no valid schema number: join the class again ('mgpu-learn workshop leave', then 'join')", name)
	case f.Token == "":
		return nil, fmt.Errorf("%s holds no token: join the class again ('mgpu-learn workshop leave', then 'join')", name)
	}
	u, err := NormalizeURL(f.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: url: %v", name, err)
	}
	// The token is the learner's only credential: keep the file private even when it was
	// copied or unpacked with looser permissions.
	if fi, err := os.Stat(name); err == nil && fi.Mode().Perm()&0o077 != 0 {
		_ = os.Chmod(name, 0o600)
	}
	return &Config{URL: u, Class: f.Class, Learner: f.Learner, Name: f.Name, Joined: f.Joined, token: f.Token}, nil
}

// saveConfig writes config.json atomically with mode 0600.
func (c *Client) saveConfig(cfg *Config) error {
	if err := c.ensureDir(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(configFile{
		Schema: configSchema, URL: cfg.URL, Class: cfg.Class, Learner: cfg.Learner,
		Name: cfg.Name, Token: cfg.token, Joined: cfg.Joined.UTC(),
	}, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(c.path(configName), append(data, '\n'), 0o600)
}

// NormalizeURL checks a class server's address and returns it without a trailing slash. It
// must be http or https, with a host, and no user, query or fragment (a password in the
// address would be written to the workspace and shown in messages).
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", raw)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q: want an http:// or https:// address", raw)
	case u.Host == "":
		return "", fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		return "", fmt.Errorf("the address must not contain a user name or password")
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%q: the address must not have a query or fragment", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}
