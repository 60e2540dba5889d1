package api

// Splitting a YAML stream into documents, re-implemented from
// k8s.io/apimachinery/pkg/util/yaml's YAMLReader (Apache-2.0) so that the client need
// not import apimachinery.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// yamlDocReader reads the documents of a YAML stream one at a time, like
// yaml.NewYAMLReader(bufio.NewReader(r)).
//
// A document ends at a line that starts with "---" followed only by spaces or a comment;
// any other text after "---" is an error. Lines come back with "\n" endings ("\r\n" is
// shortened, a missing final newline is added). The separator that ends a document is
// dropped, but a separator at the start of one is kept (as apimachinery does), so
// "---\na: 1\n" reads as one document "---\na: 1\n".
type yamlDocReader struct {
	r *bufio.Reader
}

// newYAMLDocReader returns a yamlDocReader over r.
func newYAMLDocReader(r io.Reader) *yamlDocReader {
	return &yamlDocReader{r: bufio.NewReader(r)}
}

// Read returns the next document, or io.EOF after the last one.
func (d *yamlDocReader) Read() ([]byte, error) {
	var doc bytes.Buffer
	for {
		line, err := d.r.ReadBytes('\n')
		switch {
		case errors.Is(err, io.EOF) && len(line) == 0:
			if doc.Len() > 0 {
				return doc.Bytes(), nil
			}
			return nil, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		}
		if rest, ok := bytes.CutSuffix(line, []byte("\n")); ok {
			line = append(bytes.TrimSuffix(rest, []byte("\r")), '\n')
		} else {
			line = append(line, '\n')
		}
		if after, ok := bytes.CutPrefix(line, []byte("---")); ok {
			if t := strings.TrimSpace(string(after)); t != "" && t[0] != '#' {
				return nil, fmt.Errorf("invalid Yaml document separator: %s", t)
			}
			if doc.Len() > 0 {
				return doc.Bytes(), nil
			}
		}
		doc.Write(line)
	}
}
