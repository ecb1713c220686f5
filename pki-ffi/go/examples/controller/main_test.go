package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestControllerLoopKeepsTheSecretsRotatedForFiveYears(t *testing.T) {
	var out bytes.Buffer
	rotations, err := run(context.Background(), &out, 5, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Every 395 days: at days 395, 790, 1185 and 1580 (plus a second each:
	// at NotAfter - M exactly, M is left, not less).
	if rotations != 4 {
		t.Fatalf("%d rotations in 5 years, want 4:\n%s", rotations, out.String())
	}
	if !strings.Contains(out.String(), "never untrusted") {
		t.Fatalf("the loop did not finish:\n%s", out.String())
	}
}

func TestControllerLoopForcesOneRotationPerReason(t *testing.T) {
	var out bytes.Buffer
	rotations, err := run(context.Background(), &out, 3, "incident-7")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "forced: incident-7"); n != 1 {
		t.Fatalf("%d forced rotations, want 1:\n%s", n, out.String())
	}
	if rotations < 2 {
		t.Fatalf("%d rotations, want the forced one and an automatic one:\n%s", rotations, out.String())
	}
}
