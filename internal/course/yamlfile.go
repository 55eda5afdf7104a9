package course

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlLine matches the "line N: message" form of yaml.v3's errors.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// decodeYAML strictly decodes data (the text of file, whose first line is line 1+offset) into v.
// Every problem is added to errs with its line. It returns the document's root node (a mapping)
// for locating semantic errors, or nil when the text could not be parsed at all; v may be
// partly filled even when problems were found. clean is false when v may miss values that the
// text has (anything worse than an unknown key): semantic checks of v would then report
// problems that are not there.
func decodeYAML(file string, data []byte, offset int, v any, errs *ErrorList) (root *yaml.Node, clean bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		addYAMLError(file, offset, err, errs)
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		errs.add(file, offset+1, "empty: expected a YAML mapping")
		return nil, false
	}
	root = doc.Content[0]
	if root.Kind != yaml.MappingNode {
		errs.add(file, root.Line+offset, "expected a YAML mapping of keys to values")
		return nil, false
	}
	before := len(*errs)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		addYAMLError(file, offset, err, errs)
	}
	clean = true
	for _, e := range (*errs)[before:] {
		clean = clean && strings.HasPrefix(e.Msg, "unknown key ")
	}
	shiftLines(root, offset)
	return root, clean
}

func addYAMLError(file string, offset int, err error, errs *ErrorList) {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		for _, msg := range te.Errors {
			addYAMLMessage(file, offset, msg, errs)
		}
		return
	}
	addYAMLMessage(file, offset, err.Error(), errs)
}

func addYAMLMessage(file string, offset int, msg string, errs *ErrorList) {
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		if parserProblem(m[2]) {
			n++
		}
		errs.add(file, n+offset, "%s", friendlyYAML(m[2]))
		return
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if parserProblem(msg) {
		errs.add(file, 1+offset, "%s", msg)
		return
	}
	errs.add(file, 0, "%s", msg)
}

// parserProblem reports whether msg is one of yaml.v3's parser (as opposed to scanner)
// problems. yaml.v3 numbers the lines of those from 0, and leaves the number out for the first
// line, so their line needs one added.
func parserProblem(msg string) bool {
	switch msg {
	case "did not find expected <stream-start>", "did not find expected <document start>",
		"found undefined tag handle", "did not find expected node content",
		"did not find expected '-' indicator", "did not find expected key",
		"did not find expected ',' or ']'", "did not find expected ',' or '}'",
		"found duplicate %YAML directive", "found incompatible YAML document",
		"found duplicate %TAG directive":
		return true
	}
	return false
}

// friendlyYAML rewords yaml.v3's unknown-field message, which names a Go type the author never
// sees.
func friendlyYAML(msg string) string {
	if rest, ok := strings.CutPrefix(msg, "field "); ok {
		if name, _, ok := strings.Cut(rest, " not found in type "); ok {
			return "unknown key " + strconv.Quote(name)
		}
	}
	if strings.HasPrefix(msg, "cannot unmarshal !!map into string") {
		return msg + ` (a ": " inside text starts a mapping: put the text in quotes)`
	}
	return msg
}

func shiftLines(n *yaml.Node, offset int) {
	if offset == 0 || n == nil {
		return
	}
	n.Line += offset
	for _, c := range n.Content {
		shiftLines(c, offset)
	}
}

// lineOf finds the line of the node reached from n by path: strings are mapping keys, ints
// sequence indexes. Where the path breaks off it returns the line of the deepest node found, so
// a missing key is reported at its parent.
func lineOf(n *yaml.Node, path ...any) int {
	if n == nil {
		return 0
	}
	cur := n
	for _, p := range path {
		next := child(cur, p)
		if next == nil {
			break
		}
		cur = next
	}
	return cur.Line
}

// keyLine is the line of key k in mapping n, or n's line when k is absent.
func keyLine(n *yaml.Node, k string) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				return n.Content[i].Line
			}
		}
	}
	return n.Line
}

func child(n *yaml.Node, p any) *yaml.Node {
	switch p := p.(type) {
	case string:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == p {
				return n.Content[i+1]
			}
		}
	case int:
		if n.Kind == yaml.SequenceNode && p >= 0 && p < len(n.Content) {
			return n.Content[p]
		}
	}
	return nil
}
