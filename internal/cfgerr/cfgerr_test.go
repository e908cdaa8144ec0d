package cfgerr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
)

func TestSentinelsAreDistinctAndAllMatchAny(t *testing.T) {
	a, b := cfgerr.New("invalid a"), cfgerr.New("invalid b")
	wrapped := fmt.Errorf("%w: bad value", a)
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"a is a", wrapped, a, true},
		{"a is not b", wrapped, b, false},
		{"a is ErrAny", wrapped, cfgerr.ErrAny, true},
		{"b is ErrAny", b, cfgerr.ErrAny, true},
		{"a plain error is not ErrAny", errors.New("invalid configuration"), cfgerr.ErrAny, false},
		{"ErrAny is not a", cfgerr.ErrAny, a, false},
	}
	for _, tt := range tests {
		if got := errors.Is(tt.err, tt.target); got != tt.want {
			t.Errorf("%s: errors.Is = %v, want %v", tt.name, got, tt.want)
		}
	}
	if wrapped.Error() != "invalid a: bad value" {
		t.Errorf("message %q", wrapped.Error())
	}
}

func TestUnderKeepsMessageAndMatchesBoth(t *testing.T) {
	a, b := cfgerr.New("invalid a"), cfgerr.New("invalid b")
	inner := fmt.Errorf("%w: bad name", a)
	err := cfgerr.Under(b, inner)
	if !errors.Is(err, a) || !errors.Is(err, b) || !errors.Is(err, cfgerr.ErrAny) {
		t.Errorf("Under(b, a-error) matches a=%v b=%v Any=%v, want all", errors.Is(err, a), errors.Is(err, b), errors.Is(err, cfgerr.ErrAny))
	}
	if err.Error() != inner.Error() {
		t.Errorf("message %q, want %q", err.Error(), inner.Error())
	}
	if cfgerr.Under(b, nil) != nil {
		t.Error("Under(b, nil) is not nil")
	}
}
