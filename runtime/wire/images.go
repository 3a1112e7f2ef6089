package wire

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/tessera-llm/tessera/models/vision"
)

// ImageReader reads the images a request names by URL: data URLs of PNG,
// JPEG or WebP always, http(s) URLs only through Fetch. Every image is
// decoded within Limits (vision.Decode), its header checked before its
// pixels.
type ImageReader struct {
	Limits vision.Limits
	// Fetch reads the bytes of an http or https URL, at most max of them
	// (an error past that). Nil refuses such URLs: a server that fetched
	// them would make requests on its clients' behalf, so fetching is
	// something an operator turns on (serve --image-urls).
	Fetch func(ctx context.Context, url string, max int) ([]byte, error)
}

// Read decodes the image at url.
func (r ImageReader) Read(ctx context.Context, url string) (*vision.Image, error) {
	if strings.HasPrefix(url, "data:") {
		return DecodeImageURL(url, r.Limits)
	}
	scheme, _, _ := strings.Cut(url, ":")
	switch s := strings.ToLower(scheme); {
	case (s == "http" || s == "https") && r.Fetch != nil:
		data, err := r.Fetch(ctx, url, r.Limits.MaxBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", vision.ErrBadImage, err)
		}
		return vision.Decode(data, r.Limits)
	case s == "http" || s == "https":
		return nil, fmt.Errorf("%w: images are taken as data URLs (data:image/png;base64,...); this server does not fetch %q URLs (serve --image-urls turns that on)", vision.ErrBadImage, scheme)
	}
	return nil, fmt.Errorf("%w: images are taken as data URLs (data:image/png;base64,...), not %q URLs", vision.ErrBadImage, scheme)
}

// Images decodes the image parts of ms in order (runtime.Request.Images,
// for the markers their Text holds) with r. A URL r does not take, or
// bytes that are not an image within its limits, is a ParamError.
func Images(ctx context.Context, ms []Message, r ImageReader) ([]*vision.Image, error) {
	var out []*vision.Image
	for i, m := range ms {
		for _, url := range m.Content.Images {
			img, err := r.Read(ctx, url)
			if err != nil {
				return nil, paramError("messages", "message %d's image %d: %v", i, len(out), err)
			}
			out = append(out, img)
		}
	}
	return out, nil
}

// DecodeImageURL decodes a data URL ("data:image/png;base64,...") of an
// image within lim.
func DecodeImageURL(url string, lim vision.Limits) (*vision.Image, error) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		scheme, _, _ := strings.Cut(url, ":")
		return nil, fmt.Errorf("%w: images are taken as data URLs (data:image/png;base64,...), not %q URLs", vision.ErrBadImage, scheme)
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return nil, fmt.Errorf("%w: a data URL of an image is data:MEDIATYPE;base64,DATA", vision.ErrBadImage)
	}
	if lim.MaxBytes > 0 && base64.StdEncoding.DecodedLen(len(data)) > lim.MaxBytes+2 {
		return nil, fmt.Errorf("%w: about %d bytes (at most %d)", vision.ErrBadImage, base64.StdEncoding.DecodedLen(len(data)), lim.MaxBytes)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(data); err != nil {
			return nil, fmt.Errorf("%w: its base64: %v", vision.ErrBadImage, err)
		}
	}
	return vision.Decode(raw, lim)
}
