package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/podkit/podkit/lifecycle/podenv"
)

// The secrets and config maps of the agent's static pods come from a
// directory of YAML (or JSON) files beside the manifests, for example:
//
//	pods/          --manifests: the pods
//	objects/       the secrets and config maps they reference
//	  db.yaml        kind: Secret, name: db (data base64, or stringData)
//	  app.yaml       kind: ConfigMap, name: app; more documents after ---
//
// Each file holds one or more documents of apiVersion v1 and kind Secret
// or ConfigMap; a namespace left out is "default". A secret's stringData
// is merged into its data, as the API server does. fileObjects reads the
// directory again whenever a file in it changes (by name, size or
// modification time), at the next read: a container started afterwards
// gets the new values, and lifecycle/volume's refresh updates volumes.
//
// Bounds: at most maxObjectFiles files, each at most maxObjectFileBytes;
// an object is checked against the API's 1 MiB by its readers. A file
// that cannot be read or decoded, or two files defining one object, make
// reads of the objects concerned fail with an error naming the files
// (never a silent NotFound, which an optional reference would take for
// "absent").
const (
	maxObjectFiles     = 1000
	maxObjectFileBytes = 4 << 20
)

// fileObjects is podenv.Objects over a directory of files. Safe for
// concurrent use.
type fileObjects struct {
	dir string

	mu sync.Mutex
	// stamp describes the directory as last read ("" before the first read).
	stamp string
	// objects are the objects read, by kind/namespace/name; origin the
	// file each came from; dups the objects defined by two files; broken
	// the files that could not be read, with why.
	objects map[string]any
	origin  map[string]string
	dups    map[string]string
	broken  []string
}

var _ podenv.Objects = (*fileObjects)(nil)

// newFileObjects returns a getter over dir, which it reads at the first
// Get (a missing directory holds no object).
func newFileObjects(dir string) *fileObjects {
	return &fileObjects{dir: dir}
}

// GetSecret returns the secret namespace/name of the directory: shared,
// not to be modified. A secret no file defines is the API's NotFound
// error.
func (f *fileObjects) GetSecret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := f.get("secret", namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

// GetConfigMap is GetSecret for config maps.
func (f *fileObjects) GetConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := f.get("configmap", namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

func (f *fileObjects) get(kind, namespace, name string) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reloadLocked(); err != nil {
		return nil, err
	}
	key := kind + "/" + namespace + "/" + name
	if where, dup := f.dups[key]; dup {
		return nil, fmt.Errorf("nodeagent: %s %s/%s is defined twice, in %s", kind, namespace, name, where)
	}
	if obj, ok := f.objects[key]; ok {
		return obj, nil
	}
	if len(f.broken) > 0 {
		return nil, fmt.Errorf("nodeagent: %s %s/%s not found, and some files of %s could not be read: %s", kind, namespace, name, f.dir, strings.Join(f.broken, "; "))
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: kind}, name)
}

// reloadLocked reads the directory again if it changed. f.mu must be held.
func (f *fileObjects) reloadLocked() error {
	entries, err := os.ReadDir(f.dir)
	if errors.Is(err, os.ErrNotExist) {
		entries = nil
	} else if err != nil {
		return fmt.Errorf("nodeagent: reading the objects directory: %w", err)
	}
	var files []string
	var stamp strings.Builder
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		files = append(files, e.Name())
		fmt.Fprintf(&stamp, "%s:%d:%d;", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	if stamp.String() == f.stamp && f.objects != nil {
		return nil
	}
	if len(files) > maxObjectFiles {
		return fmt.Errorf("nodeagent: the objects directory %s holds %d files, more than %d", f.dir, len(files), maxObjectFiles)
	}
	sort.Strings(files)
	f.objects, f.origin, f.dups, f.broken = map[string]any{}, map[string]string{}, map[string]string{}, nil
	for _, name := range files {
		objs, err := readObjectFile(filepath.Join(f.dir, name))
		if err != nil {
			f.broken = append(f.broken, name+": "+err.Error())
			continue
		}
		for key, obj := range objs {
			if prev, seen := f.origin[key]; seen {
				f.dups[key] = prev + " and " + name
				continue
			}
			f.objects[key], f.origin[key] = obj, name
		}
	}
	f.stamp = stamp.String()
	return nil
}

// readObjectFile decodes the secrets and config maps of one file, by
// kind/namespace/name.
func readObjectFile(path string) (map[string]any, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxObjectFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxObjectFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxObjectFileBytes)
	}
	out := map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || isComment(doc) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		var (
			obj  any
			meta *metav1.ObjectMeta
			kind string
		)
		switch {
		case tm.APIVersion == "v1" && tm.Kind == "Secret":
			s := &v1.Secret{}
			if err := yaml.UnmarshalStrict(doc, s); err != nil {
				return nil, fmt.Errorf("document %d: not a valid secret: %w", n, err)
			}
			for k, v := range s.StringData {
				if s.Data == nil {
					s.Data = map[string][]byte{}
				}
				s.Data[k] = []byte(v)
			}
			s.StringData = nil
			if s.Type == "" {
				s.Type = v1.SecretTypeOpaque
			}
			obj, meta, kind = s, &s.ObjectMeta, "secret"
		case tm.APIVersion == "v1" && tm.Kind == "ConfigMap":
			cm := &v1.ConfigMap{}
			if err := yaml.UnmarshalStrict(doc, cm); err != nil {
				return nil, fmt.Errorf("document %d: not a valid config map: %w", n, err)
			}
			obj, meta, kind = cm, &cm.ObjectMeta, "configmap"
		default:
			return nil, fmt.Errorf("document %d: apiVersion %q and kind %q; want v1 Secret or ConfigMap", n, tm.APIVersion, tm.Kind)
		}
		if meta.Name == "" {
			return nil, fmt.Errorf("document %d: a %s without a name", n, kind)
		}
		if meta.Namespace == "" {
			meta.Namespace = metav1.NamespaceDefault
		}
		key := kind + "/" + meta.Namespace + "/" + meta.Name
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("document %d: %s %s/%s is defined twice", n, kind, meta.Namespace, meta.Name)
		}
		out[key] = obj
	}
}

// isComment reports whether a YAML document holds only comments.
func isComment(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}
