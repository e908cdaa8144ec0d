// Package bearer holds hutch's bearer tokens: making one, reading one from
// a private file, and checking a request's Authorization header against
// one in constant time. `hutch mcp --http` and `hutch serve --listen`
// share it.
package bearer

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"github.com/hutchsandbox/hutch/internal/private"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Token rules: long enough not to be guessed, short and plain enough to sit
// in an HTTP header.
const (
	MinLen = 16
	MaxLen = 4096
)

// New returns a fresh token: 32 random bytes, base64url.
func New() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// ReadFile reads and checks a token file: a regular file of this user's
// that neither group nor others can read or write, holding 16 to 4096
// printable ASCII characters without spaces (surrounding white space is
// trimmed). A missing file matches fs.ErrNotExist; every other error
// matches sandbox.ErrConfig and says how to fix the file.
func ReadFile(path string) (string, error) {
	f, fi, err := policy.OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("%w: token file: %v", sandbox.ErrConfig, err)
	}
	defer f.Close()
	if err := private.Check(sandbox.ErrConfig, "token file", path, fi); err != nil {
		return "", err // another user's file, whatever its mode, may be a planted token
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxLen+2))
	if err != nil {
		return "", fmt.Errorf("%w: token file: %v", sandbox.ErrConfig, err)
	}
	token := strings.TrimSpace(string(data))
	if msg := Check(token); msg != "" {
		return "", fmt.Errorf("%w: token file %s: %s", sandbox.ErrConfig, path, msg)
	}
	return token, nil
}

// Check says what is wrong with a token, or "".
func Check(token string) string {
	if len(token) < MinLen || len(token) > MaxLen {
		return fmt.Sprintf("the token has %d characters; want %d to %d (delete the file and hutch writes a new one)", len(token), MinLen, MaxLen)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c >= 0x7f {
			return fmt.Sprintf("byte %d of the token is %q; want printable ASCII without spaces", i, c)
		}
	}
	return ""
}

// WriteFile writes token to a new file (never over an existing one), mode
// 0600.
func WriteFile(path, token string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%w: write a new token: %v", sandbox.ErrConfig, err)
	}
	if _, err = f.WriteString(token + "\n"); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("%w: write a new token to %s: %v", sandbox.ErrConfig, path, err)
	}
	return nil
}

// Checker compares requests' tokens with one token, taking the same time
// for every wrong token.
type Checker struct{ sum [sha256.Size]byte }

// NewChecker returns a Checker of token.
func NewChecker(token string) Checker { return Checker{sha256.Sum256([]byte(token))} }

// Allows reports whether r carries "Authorization: Bearer TOKEN" (the
// scheme in any case). The token is never taken from the URL.
func (c Checker) Allows(r *http.Request) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare(sum[:], c.sum[:]) == 1
}

// Load reads the token in path (see ReadFile), or, when the file is
// missing, makes a new token and writes it there (mode 0600); created
// says which.
func Load(path string) (token string, created bool, err error) {
	token, err = ReadFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	if token, err = New(); err != nil {
		return "", false, err
	}
	if err = WriteFile(path, token); err != nil {
		return "", false, err
	}
	return token, true, nil
}
