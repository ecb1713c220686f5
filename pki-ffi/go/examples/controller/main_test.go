package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestControllerLoopKeepsTheSecretsRotatedForFiveYears(t *testing.T) {
	var out bytes.Buffer
	rotations, err := run(&out, 5, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rotations < 3 {
		t.Fatalf("%d rotations in 5 years, want at least 3:\n%s", rotations, out.String())
	}
}

func TestControllerLoopForcesOneRotationPerReason(t *testing.T) {
	var out bytes.Buffer
	rotations, err := run(&out, 3, "incident-7")
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
