package vision

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registers JPEG with image.Decode
	_ "image/png"  // registers PNG

	_ "golang.org/x/image/webp" // registers WebP (lossy, lossless, with alpha; not animated)
)

// ErrBadImage is returned (wrapped) for bytes that are not an image this
// package decodes, or one past the limits: a request's fault, never the
// server's.
var ErrBadImage = errors.New("bad image")

// Limits bound what Decode accepts. The dimensions are read from the
// header before any pixel is decoded, so that a small file that declares
// a huge image (a decompression bomb: a 60,000 × 60,000 PNG of a few
// kilobytes of zlib) is refused without allocating for it.
type Limits struct {
	MaxBytes  int // encoded size
	MaxPixels int // width × height
	MaxSide   int // width and height each
}

// DefaultLimits take any photo a phone takes (48 MP is 8000 × 6000) but
// not more: at most 20 MiB encoded and 50 M pixels (200 MB as RGBA while
// decoding).
var DefaultLimits = Limits{MaxBytes: 20 << 20, MaxPixels: 50_000_000, MaxSide: 16384}

// Image is an 8-bit RGB image, row-major, 3 bytes a pixel: clip.cpp's
// clip_image_u8.
type Image struct {
	W, H int
	Pix  []uint8
	Hash [32]byte // SHA-256 of the encoded bytes: the prefix cache's key
}

// Decode decodes PNG, JPEG or WebP bytes within lim: the formats a
// browser's canvas and a phone's camera give (PNG and JPEG as llama.cpp's
// stb_image reads them; WebP through golang.org/x/image, which stb_image
// does not read). Transparency is dropped, as stb_image's 3-channel load
// drops it.
func Decode(data []byte, lim Limits) (*Image, error) {
	if lim.MaxBytes > 0 && len(data) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrBadImage, len(data), lim.MaxBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w (PNG, JPEG and WebP are read)", ErrBadImage, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("%w: %s of %d × %d pixels", ErrBadImage, format, cfg.Width, cfg.Height)
	}
	if lim.MaxSide > 0 && (cfg.Width > lim.MaxSide || cfg.Height > lim.MaxSide) ||
		lim.MaxPixels > 0 && int64(cfg.Width)*int64(cfg.Height) > int64(lim.MaxPixels) {
		return nil, fmt.Errorf("%w: %s of %d × %d pixels is past the limits (%d a side, %d in all)",
			ErrBadImage, format, cfg.Width, cfg.Height, lim.MaxSide, lim.MaxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadImage, format, err)
	}
	out := FromImage(img)
	out.Hash = sha256.Sum256(data)
	return out, nil
}

// FromImage converts img to RGB, dropping alpha (the colour channels as
// stored, not composited over a background: what stb_image gives).
func FromImage(img image.Image) *Image {
	b := img.Bounds()
	out := &Image{W: b.Dx(), H: b.Dy(), Pix: make([]uint8, 3*b.Dx()*b.Dy())}
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			out.Pix[i], out.Pix[i+1], out.Pix[i+2] = c.R, c.G, c.B
			i += 3
		}
	}
	return out
}

// at returns the pixel at (x, y).
func (m *Image) at(x, y int) [3]uint8 {
	i := 3 * (y*m.W + x)
	return [3]uint8{m.Pix[i], m.Pix[i+1], m.Pix[i+2]}
}

// Preprocess turns img into the encoder's input: resized to the
// ImageSize square as clip.cpp's fixed-size preprocessor for gemma3 does
// (bilinear, the image scaled to fit and centred on black, the padding's
// sides rounded as its PAD_CEIL does), then each channel normalised,
// (v/255 - mean)/std. The result is planar: 3 planes of ImageSize² values,
// the layout of clip.cpp's inp_raw.
func Preprocess(img *Image, c Config) []float32 {
	sz := c.ImageSize
	r := resizePadded(img, sz, sz)
	out := make([]float32, 3*sz*sz)
	for ch := range 3 {
		plane := out[ch*sz*sz : (ch+1)*sz*sz]
		for i := range sz * sz {
			plane[i] = (float32(r.Pix[3*i+ch])/255 - c.Mean[ch]) / c.Std[ch]
		}
	}
	return out
}

// resizePadded is img_tool::resize with PAD_CEIL: the image scaled by the
// smaller of the two ratios (sides rounded up, at most the target's),
// bilinearly, and composited at the centre of a black target. An image
// already of the target's size is copied.
func resizePadded(img *Image, w, h int) *Image {
	if img.W == w && img.H == h {
		return img
	}
	scale := min(float32(w)/float32(img.W), float32(h)/float32(img.H))
	nw := min(int(ceil32(float32(img.W)*scale)), w)
	nh := min(int(ceil32(float32(img.H)*scale)), h)
	r := resizeBilinear(img, nw, nh)
	dst := &Image{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	ox, oy := (w-nw)/2, (h-nh)/2
	for y := range nh {
		copy(dst.Pix[3*((y+oy)*w+ox):3*((y+oy)*w+ox+nw)], r.Pix[3*y*nw:3*(y+1)*nw])
	}
	return dst
}

func ceil32(x float32) float32 {
	t := float32(int(x))
	if t < x {
		t++
	}
	return t
}

// resizeBilinear is clip.cpp's resize_bilinear: corners aligned (the
// first and last pixels of a row map onto the source's), each channel
// interpolated in float32 and truncated.
func resizeBilinear(src *Image, w, h int) *Image {
	w, h = max(w, 1), max(h, 1)
	dst := &Image{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	var xr, yr float32
	if w > 1 {
		xr = float32(src.W-1) / float32(w-1)
	}
	if h > 1 {
		yr = float32(src.H-1) / float32(h-1)
	}
	lerp := func(s, e, t float32) float32 { return s + float32((e-s)*t) }
	for y := range h {
		for x := range w {
			px, py := float32(float32(x)*xr), float32(float32(y)*yr)
			x0, y0 := min(int(px), src.W-1), min(int(py), src.H-1)
			x1, y1 := min(x0+1, src.W-1), min(y0+1, src.H-1)
			xf, yf := px-float32(x0), py-float32(y0)
			p00, p10, p01, p11 := src.at(x0, y0), src.at(x1, y0), src.at(x0, y1), src.at(x1, y1)
			i := 3 * (y*w + x)
			for c := range 3 {
				top := lerp(float32(p00[c]), float32(p10[c]), xf)
				bottom := lerp(float32(p01[c]), float32(p11[c]), xf)
				dst.Pix[i+c] = uint8(lerp(top, bottom, yf))
			}
		}
	}
	return dst
}

// Patches lays a preprocessed image (planar, side × side) out as the rows
// of the patch embedding's product: row py·n+px holds patch (px, py)'s
// values in the order of the convolution's weight, channel, then row, then
// column, so that the convolution is a product with the weight as a
// [Dim, 3·p·p] matrix.
func Patches(planar []float32, c Config) []float32 {
	p, n, sz := c.PatchSize, c.Patches(), c.ImageSize
	out := make([]float32, 0, n*n*3*p*p)
	for py := range n {
		for px := range n {
			for ch := range 3 {
				plane := planar[ch*sz*sz:]
				for ky := range p {
					row := (py*p+ky)*sz + px*p
					out = append(out, plane[row:row+p]...)
				}
			}
		}
	}
	return out
}
