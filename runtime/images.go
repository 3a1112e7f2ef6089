package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// ImageMarker stands for an image in a prompt's text (Request.Prompt or a
// message's content): llama.cpp's mtmd default marker, so that prompts
// written for llama-mtmd-cli and llama-server mean the same here. The
// i-th marker is Request.Images[i].
const ImageMarker = "<__media__>"

// ErrNoVision is returned (wrapped in ErrBadRequest) for a request with
// images to an engine loaded without a vision projector.
var ErrNoVision = errors.New("the model was loaded without a vision projector (--mmproj)")

// openProjector opens the mmproj at path (or takes vm, opened already,
// when path is "") and checks that it feeds m; on failure vm is closed.
// It returns too the ids of the marker tokens the projector's layout
// looks up in m's vocabulary (markerTokens).
func openProjector(path string, vm *vision.Model, m *models.Model) (*vision.Model, map[string]int32, error) {
	switch {
	case path != "" && vm != nil:
		vm.Close()
		return nil, nil, fmt.Errorf("a projector's path (%s) and an opened projector: give one", path)
	case path != "":
		var err error
		if vm, err = vision.Open(path); err != nil {
			return nil, nil, err
		}
	}
	path = vm.Path
	if vm.Config.Projector == vision.Gemma3 && m.Config.Arch != "gemma3" {
		vm.Close()
		return nil, nil, fmt.Errorf("mmproj %s is Gemma 3's projector; the model is %s", path, m.Config.Arch)
	}
	if vm.Config.Projector == vision.Qwen2VL && m.Config.Arch != "qwen2vl" {
		vm.Close()
		return nil, nil, fmt.Errorf("mmproj %s is Qwen2-VL's projector, whose images the language model places by M-RoPE; the model is %s, not qwen2vl", path, m.Config.Arch)
	}
	if vm.Config.Projector == vision.Qwen3VL && m.Config.Arch != "qwen3vl" {
		vm.Close()
		return nil, nil, fmt.Errorf("mmproj %s is Qwen3-VL's projector, whose images the language model places by M-RoPE and takes deepstack slices of; the model is %s, not qwen3vl", path, m.Config.Arch)
	}
	if vm.Config.OutDim != m.Config.Dim {
		vm.Close()
		return nil, nil, fmt.Errorf("mmproj %s projects into %d dimensions, the model's embeddings have %d: not its projector", path, vm.Config.OutDim, m.Config.Dim)
	}
	// An image token's deepstack slices, one for each the language model
	// adds (llama.cpp requires its input width to be the projector's).
	if got, want := len(vm.Config.Deepstack), m.Config.Deepstack; got != want {
		vm.Close()
		return nil, nil, fmt.Errorf("mmproj %s gives %d deepstack slices an image token, the model takes %d: not its projector", path, got, want)
	}
	marks, err := markerTokens(m.Tokenizer, vm.Config.Projector)
	if err != nil {
		vm.Close()
		return nil, nil, fmt.Errorf("mmproj %s: %w", path, err)
	}
	return vm, marks, nil
}

// markerTokens looks up in tok the tokens that p's layout names by their
// text (vision.MarkerTokens), as mtmd's lookup_token does: the first id
// whose text is that (a byte piece's byte, a control token's name).
func markerTokens(tok tokenizer.Tokenizer, p vision.Projector) (map[string]int32, error) {
	want := vision.MarkerTokens(p)
	if len(want) == 0 {
		return nil, nil
	}
	found := map[string]int32{}
	for id := range tok.VocabSize() {
		piece, text := tok.Piece(id), string(tok.TokenBytes(-1, id))
		for _, w := range want {
			if _, ok := found[w]; !ok && (piece == w || text == w) {
				found[w] = int32(id)
			}
		}
	}
	for _, w := range want {
		if _, ok := found[w]; !ok {
			return nil, fmt.Errorf("the language model's vocabulary has no token %q, which %s's images are marked with: not its language model", w, p)
		}
	}
	return found, nil
}

func closeProjector(vm *vision.Model) {
	if vm != nil {
		vm.Close()
	}
}

// HasVision reports whether the engine takes images.
func (e *Engine) HasVision() bool { return e.vis != nil }

// ImageTokens is how many embeddings one picture of an image becomes (0
// without a projector): the whole image's for gemma3; for idefics3 each
// tile's and the overview's (an image takes a tile per ImageSize of its
// resized sides, the overview, and the markers between them); for a tower
// that takes images at their own size (Qwen-VL), an image of the tower's
// nominal size (ImageSize²).
func (e *Engine) ImageTokens() int {
	if e.vis == nil {
		return 0
	}
	nx, ny := e.vis.cfg.Grid(e.vis.cfg.ImageSize, e.vis.cfg.ImageSize)
	return nx * ny
}

// imageGrid is how many tokens across and down each of img's pictures
// takes (vision.Preprocess's: idefics3's tiles and overview alike; a
// Qwen-VL image at its own size).
func (e *Engine) imageGrid(img *vision.Image) (nx, ny int) {
	return e.vis.cfg.Grid(img.W, img.H)
}

// EncodeImage returns img's embeddings in the language model's space, one
// row of the model's width a token (imageGrid's for each of its pictures:
// its tiles, then the overview): what the sequence reads at the image's
// positions. An image encoded recently (by hash) is not encoded again.
func (e *Engine) EncodeImage(ctx context.Context, img *vision.Image) ([]float32, error) {
	if e.vis == nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, ErrNoVision)
	}
	if emb, ok := e.images.get(img.Hash); ok {
		return emb, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	emb, err := e.encodePictures(ctx, img)
	if err != nil {
		return nil, fmt.Errorf("encode image: %w", err)
	}
	e.images.put(img.Hash, emb)
	return emb, nil
}

// encodePictures runs the tower on img under the step lock (the tower
// runs on the language model's device): a SigLIP tower a picture at a
// time, so that the steps of other sequences go on between the tiles of
// a large image and a cancelled request stops there; Qwen-VL's in one go.
func (e *Engine) encodePictures(ctx context.Context, img *vision.Image) ([]float32, error) {
	if e.vis.qwen != nil {
		e.stepMu.Lock()
		defer e.stepMu.Unlock()
		return e.vis.encode(img)
	}
	var emb []float32
	for _, pic := range vision.Preprocess(img, e.vis.cfg) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e.stepMu.Lock()
		out, err := e.vis.encodeTile(pic)
		e.stepMu.Unlock()
		if err != nil {
			return nil, err
		}
		emb = append(emb, out...)
	}
	return emb, nil
}

// imageSpan is where an image's embeddings go in a sequence: positions
// start..start+rows-1, row i of embeds (rows × the projector's
// EmbedWidth: the model's width, Qwen3-VL's deepstack slices after it)
// at start+i; the image is nx × ny tokens, row by row (M-RoPE's places).
type imageSpan struct {
	start, rows int
	nx, ny      int
	embeds      []float32
}

// end is the position after the span.
func (s imageSpan) end() int { return s.start + s.rows }

// spanAt returns the span holding position pos, if any.
func spanAt(spans []imageSpan, pos int) (imageSpan, bool) {
	for _, s := range spans {
		if pos >= s.start && pos < s.end() {
			return s, true
		}
	}
	return imageSpan{}, false
}

// nextSpan returns the first span starting at or after pos, if any.
func nextSpan(spans []imageSpan, pos int) (imageSpan, bool) {
	for _, s := range spans {
		if s.start >= pos {
			return s, true
		}
	}
	return imageSpan{}, false
}

// imageTokens tokenizes a request with images as llama.cpp's
// mtmd_tokenize does: the prompt text (rendered with the chat template for
// Messages) is cut at each ImageMarker; the marker becomes the parts of
// vision.Layout for the image (for Gemma 3 <start_of_image>, the image's
// tokens, <end_of_image>; for Qwen-VL likewise between <|vision_start|>
// and <|vision_end|>; for SmolVLM each tile's tokens after its row and
// column marker, then the overview's between their markers). Each
// piece of text (the prompt's pieces and the layout's texts) is tokenized
// on its own, with special tokens, after the BOS the request would have
// without images; the layout's looked-up markers are single ids: what
// mtmd_tokenize gives, ids for ids. An image's tokens are imageIDs of its
// hash, tile after tile; starts[i] are where image i's tiles begin.
func (e *Engine) imageTokens(ctx context.Context, req Request) (ids []int32, starts [][]int, err error) {
	if e.vis == nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBadRequest, ErrNoVision)
	}
	if req.Tokens != nil { // rendered already (PrepareChat): find each image's tokens
		return e.locateImages(req.Tokens, req.Images)
	}
	tok := e.model.Tokenizer
	text, bos := req.Prompt, true
	if req.Messages != nil {
		if text, err = e.renderChat(req); err != nil {
			return nil, nil, err
		}
		_, bos = e.chat.(chat.Plain)
	} else {
		e.prompts.Add(1)
	}
	pieces := strings.Split(text, ImageMarker)
	if len(pieces)-1 != len(req.Images) {
		return nil, nil, fmt.Errorf("%w: %d images but %d %s markers in the prompt", ErrBadRequest, len(req.Images), len(pieces)-1, ImageMarker)
	}
	ctxLen := e.model.Config.Context
	// add tokenizes one piece of text on its own (its own SentencePiece
	// space prefix, as mtmd's add_text), with BOS first when asked (the
	// tokenizer's: none for one that adds none).
	add := func(text string, bos bool) error {
		enc, err := tokenizer.EncodeSpecialBounded(ctx, tok, text, bos, ctxLen-1-len(ids))
		if errors.Is(err, tokenizer.ErrTooLong) {
			return fmt.Errorf("%w: the prompt has more tokens than the context of %d holds", ErrContextFull, ctxLen)
		} else if err != nil {
			return err
		}
		for _, id := range enc {
			ids = append(ids, int32(id))
		}
		return nil
	}
	if err := add("", bos); err != nil {
		return nil, nil, err
	}
	for i, piece := range pieces {
		if err := add(piece, false); err != nil {
			return nil, nil, err
		}
		if i == len(req.Images) {
			break
		}
		img := req.Images[i]
		if img == nil {
			return nil, nil, fmt.Errorf("%w: image %d is missing", ErrBadRequest, i)
		}
		g := e.vis.cfg.TilingOf(img.W, img.H)
		nx, ny := e.imageGrid(img)
		n := nx * ny
		if len(ids)+g.Tiles()*n >= ctxLen {
			return nil, nil, fmt.Errorf("%w: image %d's %d tokens do not fit the context of %d", ErrContextFull, i, g.Tiles()*n, ctxLen)
		}
		all := imageIDs(img.Hash, g.Tiles()*n, e.model.Config.Vocab)
		var tiles []int
		for _, part := range vision.Layout(e.vis.cfg.Projector, g) {
			switch {
			case part.Text == "":
				tiles = append(tiles, len(ids))
				ids = append(ids, all[part.Tile*n:(part.Tile+1)*n]...)
			case part.Lookup:
				ids = append(ids, e.vis.marks[part.Text])
			default:
				if err := add(part.Text, false); err != nil {
					return nil, nil, err
				}
			}
		}
		starts = append(starts, tiles)
	}
	if len(ids) >= ctxLen {
		return nil, nil, fmt.Errorf("%w: %d tokens, the context is %d", ErrContextFull, len(ids), ctxLen)
	}
	return ids, starts, nil
}

// locateImages finds, in ids, the tokens of each tile of each image in
// order (ids that imageTokens rendered): a sequence of ImageTokens ids
// drawn from the image's hash does not occur by chance.
func (e *Engine) locateImages(ids []int32, images []*vision.Image) ([]int32, [][]int, error) {
	var starts [][]int
	from := 0
	for i, img := range images {
		if img == nil {
			return nil, nil, fmt.Errorf("%w: image %d is missing", ErrBadRequest, i)
		}
		tiles := e.vis.tiles(img)
		nx, ny := e.imageGrid(img)
		n := nx * ny
		all := imageIDs(img.Hash, tiles*n, e.model.Config.Vocab)
		var st []int
		for k := range tiles {
			want := all[k*n : (k+1)*n]
			at := -1
			for j := from; j+len(want) <= len(ids); j++ {
				if slices.Equal(ids[j:j+len(want)], want) {
					at = j
					break
				}
			}
			if at < 0 {
				return nil, nil, fmt.Errorf("%w: the prompt's tokens do not hold image %d's: give a request with images as text (Prompt or Messages) with %s where each image goes", ErrBadRequest, i, ImageMarker)
			}
			st = append(st, at)
			from = at + len(want)
		}
		starts = append(starts, st)
	}
	return ids, starts, nil
}

// imageSpans encodes req's images (EncodeImage: once each, by hash) and
// places each tile's embeddings at its start, as imageTokens gave them.
func (e *Engine) imageSpans(ctx context.Context, req Request, starts [][]int) ([]imageSpan, error) {
	var spans []imageSpan
	dim := e.vis.cfg.EmbedWidth()
	for i, tiles := range starts {
		emb, err := e.EncodeImage(ctx, req.Images[i])
		if err != nil {
			return nil, err
		}
		nx, ny := e.imageGrid(req.Images[i])
		n := nx * ny
		if len(emb) != len(tiles)*n*dim {
			return nil, fmt.Errorf("encode image %d: %d values for %d tiles of %d tokens", i, len(emb), len(tiles), n)
		}
		for k, at := range tiles {
			spans = append(spans, imageSpan{start: at, rows: n, nx: nx, ny: ny, embeds: emb[k*n*dim : (k+1)*n*dim]})
		}
	}
	return spans, nil
}

// imageNonCausal reports whether an image's tokens attend to each other
// both ways in the language model (mtmd_decode_use_non_causal: Gemma 3).
func imageNonCausal(p vision.Projector) bool { return p == vision.Gemma3 }

// imageCacheSize is how many images' embeddings an engine keeps.
const imageCacheSize = 16

// imageCache keeps the embeddings of the images encoded last, by hash,
// so that a conversation that sends its image again with each turn
// encodes it once.
type imageCache struct {
	mu    sync.Mutex
	size  int
	order [][32]byte // oldest first
	embs  map[[32]byte][]float32
}

func newImageCache(size int) *imageCache {
	return &imageCache{size: size, embs: map[[32]byte][]float32{}}
}

func (c *imageCache) get(h [32]byte) ([]float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	emb, ok := c.embs[h]
	if ok {
		c.touch(h)
	}
	return emb, ok
}

func (c *imageCache) put(h [32]byte, emb []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.embs[h]; !ok && len(c.order) == c.size {
		delete(c.embs, c.order[0])
		c.order = c.order[1:]
	}
	c.embs[h] = emb
	c.touch(h)
}

// touch moves h to the newest end of the order. Called with c.mu held.
func (c *imageCache) touch(h [32]byte) {
	for i, o := range c.order {
		if o == h {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
	c.order = append(c.order, h)
}

// imageRows is what a step's image rows read: batch row rows[i] takes row
// i of the llama's image tensor (written by setImages).
type imageRows struct{ rows []int }

// setImages writes the embeddings of plan's image rows to the image
// tensor, for the step's layersAndHead to put in place of those rows'
// token embeddings, and reports whether the step is an image's whole
// remaining span of a projector whose images attend both ways (plan then
// holds that one sequence: see plan). It returns nil rows for a step
// without images.
func (e *Engine) setImages(plan []work) (*imageRows, bool, error) {
	if e.vis == nil {
		return nil, false, nil
	}
	dim, width := e.model.Config.Dim, e.vis.cfg.EmbedWidth()
	var in imageRows
	var data []float32
	// deep[k] is every row's deepstack slice k+1 (zero for text), the
	// step's rows in order.
	deep := make([][]float32, len(e.vis.cfg.Deepstack))
	row, both := 0, false
	for _, w := range plan {
		for t := range w.n {
			pos := w.s.stored + t
			sp, ok := spanAt(w.s.images, pos)
			if !ok {
				for k := range deep {
					deep[k] = append(deep[k], make([]float32, dim)...)
				}
				continue
			}
			emb := sp.embeds[(pos-sp.start)*width : (pos-sp.start+1)*width]
			in.rows = append(in.rows, row+t)
			data = append(data, emb[:dim]...)
			for k := range deep {
				deep[k] = append(deep[k], emb[(k+1)*dim:(k+2)*dim]...)
			}
			both = imageNonCausal(e.vis.cfg.Projector)
		}
		row += w.n
	}
	if in.rows == nil {
		return nil, false, nil
	}
	if e.net.img == nil {
		var err error
		if e.net.img, err = e.be.NewTensor(e.net.maxBatch, dim); err != nil {
			return nil, false, err
		}
		for range deep {
			t, err := e.be.NewTensor(e.net.maxBatch, dim)
			if err != nil {
				return nil, false, err
			}
			e.net.deep = append(e.net.deep, t)
		}
	}
	if err := e.be.Write(e.net.img, data); err != nil {
		return nil, false, err
	}
	for k, d := range deep {
		if err := e.be.Write(e.net.deep[k], d); err != nil {
			return nil, false, err
		}
	}
	return &in, both, nil
}

// addDeepstack adds, after layer l of a step with image rows, the image
// tokens' deepstack slice l+1 to their hidden states (Qwen3-VL, as
// llama.cpp's qwen3vl graph does for l below n_deepstack_layers); text
// rows' slices are zero.
func (n *llama) addDeepstack(l int) {
	if n.images != nil && l < len(n.deep) {
		n.be.Add(n.x, n.deep[l])
	}
}

// injectImages puts the step's image rows in place of their token
// embeddings (after the embedding scale, which llama.cpp applies to
// tokens, not to embeddings given as input).
func (n *llama) injectImages() {
	if n.images == nil {
		return
	}
	for i, r := range n.images.rows {
		n.be.CopyRow(n.x, r, n.img, i)
	}
}

// stepAttention is a layer's attention for the step being queued:
// bidirectional for an image step whose tokens attend both ways.
func (n *llama) stepAttention(a backend.Attention) backend.Attention {
	a.Bidirectional = n.bidirectional
	return a
}

// imageOnly returns the first running sequence whose next position is
// inside an image that attends both ways: the next step reads the rest
// of that image and nothing else, since a bidirectional step lets every
// row of the batch see its sequence's later rows. Called with e.mu held.
func (e *Engine) imageOnly() *sequence {
	if e.vis == nil || !imageNonCausal(e.vis.cfg.Projector) {
		return nil
	}
	for _, s := range e.running {
		if _, ok := spanAt(s.images, s.stored); ok {
			return s
		}
	}
	return nil
}

// imageChunk bounds the rows a step reads of s from its next position:
// the rest of an image it is inside of, or up to the next image's start
// (whose rows must be a step of their own when they attend both ways).
func (e *Engine) imageChunk(s *sequence, n int) int {
	if sp, ok := spanAt(s.images, s.stored); ok && imageNonCausal(e.vis.cfg.Projector) {
		return sp.end() - s.stored
	}
	if sp, ok := nextSpan(s.images, s.stored); ok && imageNonCausal(e.vis.cfg.Projector) {
		return min(n, sp.start-s.stored)
	}
	return n
}

// ImageEncodeTime is the milliseconds the tower takes to encode an image
// of its own size (preprocessing included), after one encoding that
// compiles the pipelines, and the embeddings it makes (ImageTokens for
// each of its pictures: one for gemma3, an idefics3 image's tiles and
// overview); the embedding cache is not consulted, so that a benchmark
// (runtime/eval) times the encoding itself. A cancelled ctx stops it
// between pictures, as a request's encoding stops.
func (e *Engine) ImageEncodeTime(ctx context.Context) (ms float64, tokens int, err error) {
	if e.vis == nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrBadRequest, ErrNoVision)
	}
	size := e.vis.cfg.ImageSize
	img := &vision.Image{W: size, H: size, Pix: make([]uint8, 3*size*size)}
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	if _, err := e.encodePictures(ctx, img); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := e.encodePictures(ctx, img); err != nil {
		return 0, 0, err
	}
	nx, ny := e.imageGrid(img)
	return float64(time.Since(start).Microseconds()) / 1000, e.vis.tiles(img) * nx * ny, nil
}

// mrope reports whether the language model places images by M-RoPE
// (Qwen-VL): then a sequence's rotary positions leave its cache
// positions after an image (mropePos).
func (e *Engine) mrope() bool { return e.vis != nil && e.model.Config.RopeSections != [4]int{} }

// mropePos is the four rotary positions (time, height, width and a
// fourth) of position pos of a sequence with images at spans, as
// llama.cpp's mtmd places them: an image of nx × ny tokens whose first
// token is at rotary position base turns token i by (base, base + i/nx,
// base + i%nx, 0) and moves the text after it on by max(nx, ny); text
// turns every axis by its rotary position.
func mropePos(spans []imageSpan, pos int) [4]int32 {
	saved := 0 // positions the images before pos took less than their tokens
	for _, sp := range spans {
		if pos >= sp.end() {
			saved += sp.rows - max(sp.nx, sp.ny)
			continue
		}
		if pos >= sp.start {
			base, i := sp.start-saved, pos-sp.start
			return [4]int32{int32(base), int32(base + i/sp.nx), int32(base + i%sp.nx), 0}
		}
		break
	}
	p := int32(pos - saved)
	return [4]int32{p, p, p, p}
}

// ropePositions sets b.RopePos for a plan whose sequences have images
// placed by M-RoPE (nil otherwise: every axis turns by Pos).
func (e *Engine) ropePositions(plan []work, b *backend.Batch) {
	if !e.mrope() || !slices.ContainsFunc(plan, func(w work) bool { return w.s.images != nil }) {
		return
	}
	b.RopePos = make([]int32, 0, 4*len(b.Pos))
	for _, w := range plan {
		for t := range w.n {
			p := mropePos(w.s.images, w.s.stored+t)
			b.RopePos = append(b.RopePos, p[:]...)
		}
	}
}
