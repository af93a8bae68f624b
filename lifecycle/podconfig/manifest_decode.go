package podconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decodeManifest decodes one v1 Pod from YAML or JSON, strictly, from the
// first YAML document of data, and says how many documents data holds.
func decodeManifest(data []byte) (*v1.Pod, int, error) {
	docs := yamlDocuments(data)
	if len(docs) == 0 {
		return nil, 0, errors.New("the file is empty")
	}
	data = docs[0]
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, len(docs), fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	if tm.APIVersion != "v1" || tm.Kind != "Pod" {
		return nil, len(docs), fmt.Errorf("apiVersion %q and kind %q; want apiVersion \"v1\" and kind \"Pod\"", tm.APIVersion, tm.Kind)
	}
	pod := &v1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		return nil, len(docs), fmt.Errorf("not a valid pod: %w", err)
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		grace := int64(v1.DefaultTerminationGracePeriodSeconds)
		pod.Spec.TerminationGracePeriodSeconds = &grace
	}
	return pod, len(docs), nil
}

// yamlDocuments splits data into its YAML documents ("---" lines),
// leaving out those with nothing but blanks and comments. JSON is one
// document.
func yamlDocuments(data []byte) [][]byte {
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if err != nil {
			// io.EOF, or a line too long for the reader: what was read so
			// far stands, and decoding the first document reports the rest.
			if len(docs) == 0 && !errors.Is(err, io.EOF) {
				docs = append(docs, data)
			}
			return docs
		}
		if !blankYAML(doc) {
			docs = append(docs, doc)
		}
	}
}

// blankYAML reports whether a YAML document holds only blanks and
// comments.
func blankYAML(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}
