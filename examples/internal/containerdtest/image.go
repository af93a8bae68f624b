package containerdtest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"
)

// File is one entry of an image's only layer.
type File struct {
	// Path is the absolute path in the image, e.g. "/bin/busybox".
	Path string
	// Mode is the permission bits (0o755 for executables).
	Mode int64
	// Body is a regular file's content (when Link is empty).
	Body []byte
	// Link, when set, makes the entry a symbolic link to Link.
	Link string
}

// Image is a one-layer OCI image to write with WriteImage.
type Image struct {
	// Name is the full reference the image is imported as, e.g.
	// "podkit.test/busybox:1".
	Name string
	// Files make up the layer; their parent directories are added.
	Files []File
	// Entrypoint and Env go into the image config.
	Entrypoint []string
	Env        []string
}

const (
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WriteImage writes img to path as an OCI image-layout tar (oci-layout,
// index.json, blobs/sha256/...), which `ctr images import` reads.
func WriteImage(path string, img Image) error {
	layer, err := layerTar(img.Files)
	if err != nil {
		return err
	}
	layerDesc := blobDescriptor(mediaTypeLayer, layer)
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config":       map[string]any{"Entrypoint": img.Entrypoint, "Env": img.Env},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	})
	if err != nil {
		return err
	}
	configDesc := blobDescriptor(mediaTypeConfig, config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaTypeManifest,
		"config":        configDesc,
		"layers":        []descriptor{layerDesc},
	})
	if err != nil {
		return err
	}
	manifestDesc := blobDescriptor(mediaTypeManifest, manifest)
	manifestDesc.Annotations = map[string]string{
		"io.containerd.image.name":          img.Name,
		"org.opencontainers.image.ref.name": img.Name,
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []descriptor{manifestDesc}})
	if err != nil {
		return err
	}

	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	entries := []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(layerDesc), layer},
		{blobPath(configDesc), config},
		{blobPath(manifestDesc), manifest},
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.body))}); err != nil {
			return err
		}
		if _, err := tw.Write(e.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// layerTar is the uncompressed layer holding files and their directories.
func layerTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	var addDirs func(p string) error
	addDirs = func(p string) error {
		for i := len(p) - 1; i > 0; i-- {
			if p[i] != '/' {
				continue
			}
			dir := p[1 : i+1]
			if dirs[dir] {
				return nil
			}
			if err := addDirs(p[:i]); err != nil {
				return err
			}
			dirs[dir] = true
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755})
		}
		return nil
	}
	for _, f := range files {
		if len(f.Path) < 2 || f.Path[0] != '/' {
			return nil, fmt.Errorf("containerdtest: image file path %q is not absolute", f.Path)
		}
		if err := addDirs(f.Path); err != nil {
			return nil, err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path[1:], Mode: f.Mode, Size: int64(len(f.Body))}
		if f.Link != "" {
			h = &tar.Header{Typeflag: tar.TypeSymlink, Name: f.Path[1:], Linkname: f.Link, Mode: 0o777}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if f.Link == "" {
			if _, err := tw.Write(f.Body); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func blobDescriptor(mediaType string, body []byte) descriptor {
	sum := sha256.Sum256(body)
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(body))}
}

func blobPath(d descriptor) string { return "blobs/sha256/" + d.Digest[len("sha256:"):] }
