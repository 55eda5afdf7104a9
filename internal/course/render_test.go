package course

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

const sampleMD = "# Peer copies\n\nA **long** paragraph that has to wrap because it is much longer than the narrow width we ask for in this test, with `code` and a [link](https://example.com).\n\n## Steps\n\n1. first\n2. second\n\n```c\ncudaMemcpyPeerAsync(dst, 1, src, 0, n, s);\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"

func TestRenderPlainHasNoEscapes(t *testing.T) {
	t.Setenv("GLAMOUR_STYLE", "dark") // plain must win over the environment
	t.Setenv("COLORTERM", "truecolor")
	for _, width := range []int{40, 60, 100} {
		out, err := Render(sampleMD, width, true)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(out, '\x1b') {
			t.Fatalf("plain output has escape sequences: %q", out)
		}
		for _, want := range []string{"Peer copies", "Steps", "cudaMemcpyPeerAsync", "second"} {
			if !strings.Contains(out, want) {
				t.Errorf("width %d: output lacks %q:\n%s", width, want, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasSuffix(line, " ") {
				t.Errorf("width %d: trailing spaces in %q", width, line)
			}
			if w := ansi.StringWidth(line); w > width {
				t.Errorf("width %d: line is %d wide: %q", width, w, line)
			}
		}
	}
}

func TestRenderStyled(t *testing.T) {
	t.Setenv("GLAMOUR_STYLE", "")
	t.Setenv("COLORTERM", "truecolor")
	out, err := Render(sampleMD, 80, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\x1b[") {
		t.Errorf("styled output has no escape sequences: %q", out)
	}
	if !strings.Contains(ansi.Strip(out), "cudaMemcpyPeerAsync") {
		t.Errorf("styled output lost text")
	}
}

func TestRenderHonoursGlamourStyle(t *testing.T) {
	t.Setenv("GLAMOUR_STYLE", "no-such-style-anywhere")
	if _, err := Render(sampleMD, 80, false); err == nil {
		t.Error("an unknown GLAMOUR_STYLE was ignored")
	}
	if _, err := Render(sampleMD, 80, true); err != nil {
		t.Errorf("plain rendering should not read GLAMOUR_STYLE: %v", err)
	}
	t.Setenv("GLAMOUR_STYLE", "notty")
	out, err := Render("plain **words**", 80, false)
	if err != nil || !strings.Contains(ansi.Strip(out), "words") {
		t.Errorf("GLAMOUR_STYLE=notty: %q %v", out, err)
	}
}
