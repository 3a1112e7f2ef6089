package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/tessera-llm/tessera/runtime"
)

// Source is a prefix cache to publish: a *runtime.Engine.
type Source interface {
	WatchKVCache(fn func(runtime.KVEvent)) []runtime.KVEvent
	KVBlockSize() int
}

// Options configure a Publisher.
type Options struct {
	// Endpoint is the PUB socket's address. As vLLM decides, one with a
	// wildcard host (tcp://*:5557, tcp://[::]:5557), ipc:// or inproc://
	// is bound and any other connected to.
	Endpoint string
	// Replay, if set, is bound as a ROUTER socket that answers a request
	// of an 8-byte big-endian sequence number (sent by a DEALER or REQ
	// socket, after the empty delimiter frame) with each buffered batch
	// from that number on as [sequence, payload], then [-1, empty], as
	// vLLM's ZmqEventPublisher does.
	Replay string
	// Buffer is how many batches the replay keeps (default 10000, vLLM's
	// buffer_steps).
	Buffer int
	// Model is the served model's name, which block hashes are chained
	// from; Topic defaults to kv@<host name>@<Model>, the form llm-d's
	// indexer reads the pod and the model from.
	Model, Topic string
	// MaxPending bounds the events waiting to be sent (default 1<<20);
	// past it, as when no batch could be sent for long, the publisher
	// drops them and sends the whole cache again, after AllBlocksCleared.
	MaxPending int
	Logger     *slog.Logger
}

// sendTimeout bounds one send on the PUB socket, so that a stuck
// subscriber does not hold the events of every other.
const sendTimeout = 5 * time.Second

// endSeq ends a replay: sequence number -1.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Publisher sends one engine's prefix-cache events. Its first batch
// (sequence 0) is AllBlocksCleared, for subscribers that knew an earlier
// process under the same topic, followed by every block cached then; a
// subscriber that joins later replays from 0 while the buffer holds it.
type Publisher struct {
	src       Source
	opts      Options
	blockSize int
	root      uint64 // the base model's chain origin
	pub       zmq4.Socket
	replay    zmq4.Socket
	log       *slog.Logger

	mu       sync.Mutex // guards what follows, filled from the engine's lock
	gen      uint64     // the watcher generation whose events count
	pending  []runtime.KVEvent
	overflow bool
	wake     chan struct{}

	// The sending goroutine's: published hashes with how many cached
	// blocks have each (the cache may hold two blocks of one hash; the
	// hash is stored once and removed with the last), and the next
	// sequence number.
	count map[uint64]int
	seq   atomic.Uint64

	bufMu  sync.Mutex
	buffer []sent // the last Buffer batches, oldest first

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type sent struct {
	seq     uint64
	payload []byte
}

// New starts publishing src's events.
func New(ctx context.Context, src Source, opts Options) (*Publisher, error) {
	if opts.Endpoint == "" {
		return nil, errors.New("kvevents: no endpoint")
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 10000
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 1 << 20
	}
	if opts.Topic == "" {
		host, _ := os.Hostname()
		opts.Topic = "kv@" + host + "@" + opts.Model
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Publisher{src: src, opts: opts, blockSize: src.KVBlockSize(), root: rootHash(opts.Model, ""), log: opts.Logger,
		wake: make(chan struct{}, 1), cancel: cancel}
	p.pub = zmq4.NewPub(ctx, zmq4.WithTimeout(sendTimeout))
	if err := open(p.pub, opts.Endpoint, binds(opts.Endpoint)); err != nil {
		cancel()
		return nil, err
	}
	if opts.Replay != "" {
		p.replay = zmq4.NewRouter(ctx, zmq4.WithTimeout(sendTimeout))
		if err := open(p.replay, opts.Replay, true); err != nil {
			p.pub.Close()
			cancel()
			return nil, err
		}
		p.wg.Go(func() { p.serveReplays(ctx) })
	}
	p.resync() // the first batch: the whole cache
	p.wg.Go(func() { p.run(ctx) })
	return p, nil
}

// binds tells whether vLLM binds an endpoint rather than connecting.
func binds(ep string) bool {
	return strings.Contains(ep, "*") || strings.Contains(ep, "::") || strings.HasPrefix(ep, "ipc://") || strings.HasPrefix(ep, "inproc://")
}

func open(s zmq4.Socket, ep string, bind bool) error {
	var err error
	if bind {
		err = s.Listen(ep)
	} else {
		err = s.Dial(ep)
	}
	if err != nil {
		return fmt.Errorf("kvevents: %s: %w", ep, err)
	}
	return nil
}

// Addr is the PUB socket's address when it was bound (with the port
// chosen when the endpoint's was 0), else nil.
func (p *Publisher) Addr() net.Addr { return p.pub.Addr() }

// ReplayAddr is the replay socket's address, or nil without one.
func (p *Publisher) ReplayAddr() net.Addr {
	if p.replay == nil {
		return nil
	}
	return p.replay.Addr()
}

// Next is the sequence number the next batch will have: how many were
// sent.
func (p *Publisher) Next() uint64 { return p.seq.Load() }

// Topic is the topic every batch is sent under.
func (p *Publisher) Topic() string { return p.opts.Topic }

// Close closes the sockets and stops watching the engine (after the
// sending goroutine, which may start a new watcher, has ended).
func (p *Publisher) Close() error {
	p.cancel()
	err := p.pub.Close()
	if p.replay != nil {
		err = errors.Join(err, p.replay.Close())
	}
	p.wg.Wait()
	p.src.WatchKVCache(nil)
	return err
}

// add queues an event of watcher generation g. It runs with the engine's
// lock held: it only appends.
func (p *Publisher) add(g uint64, ev runtime.KVEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g != p.gen || p.overflow {
		return
	}
	if len(p.pending) >= p.opts.MaxPending {
		p.overflow, p.pending = true, nil
	} else {
		p.pending = append(p.pending, ev)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Publisher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.mu.Lock()
		evs, overflow := p.pending, p.overflow
		p.pending = nil
		p.mu.Unlock()
		if overflow {
			p.log.Warn("KV events fell behind: sending the whole cache again", "topic", p.opts.Topic)
			p.resync()
			continue
		}
		var b Batch
		for _, ev := range evs {
			p.append(&b, ev)
		}
		if len(b.Events) > 0 {
			p.send(b)
		}
	}
}

// resync starts a new watcher generation and sends AllBlocksCleared and
// then every block cached now, so that subscribers start again from the
// cache as it is. The engine installs the watcher and lists its cache
// under one lock: the watcher's events all follow the list.
func (p *Publisher) resync() {
	p.mu.Lock()
	p.gen++
	g := p.gen
	p.pending, p.overflow = nil, false
	p.mu.Unlock()
	cached := p.src.WatchKVCache(func(ev runtime.KVEvent) { p.add(g, ev) })
	p.count = make(map[uint64]int)
	b := Batch{Events: []Event{{Cleared: true}}}
	for _, ev := range cached {
		p.append(&b, ev)
	}
	p.send(b)
}

// append adds one cache event to b as vLLM would send it: a stored block
// only when no block of its hash is cached yet, a removed one only with
// the last; consecutive stored blocks of one chain in one BlockStored.
func (p *Publisher) append(b *Batch, ev runtime.KVEvent) {
	root := p.root
	if ev.Adapter != "" {
		root = rootHash(p.opts.Model, ev.Adapter)
	}
	h := blockHash(root, ev.Hash)
	if !ev.Stored {
		switch p.count[h] {
		case 0:
			p.log.Warn("KV events: removed a block never stored", "hash", h)
			return
		case 1:
			delete(p.count, h)
		default:
			p.count[h]--
			return
		}
		if n := len(b.Events); n > 0 && b.Events[n-1].Removed != nil {
			last := b.Events[n-1].Removed
			last.BlockHashes = append(last.BlockHashes, h)
			return
		}
		b.Events = append(b.Events, Event{Removed: &BlockRemoved{BlockHashes: []uint64{h}, Medium: MediumGPU}})
		return
	}
	if p.count[h]++; p.count[h] > 1 {
		return
	}
	var parent *uint64
	if !ev.First {
		ph := blockHash(root, ev.Parent)
		parent = &ph
	}
	if n := len(b.Events); n > 0 && parent != nil {
		if last := b.Events[n-1].Stored; last != nil && last.BlockHashes[len(last.BlockHashes)-1] == *parent && loraName(last) == ev.Adapter {
			last.BlockHashes = append(last.BlockHashes, h)
			last.TokenIDs = append(last.TokenIDs, ev.Tokens...)
			return
		}
	}
	s := &BlockStored{BlockHashes: []uint64{h}, ParentHash: parent, TokenIDs: append([]int32(nil), ev.Tokens...), BlockSize: p.blockSize, Medium: MediumGPU}
	if ev.Adapter != "" {
		name, id := ev.Adapter, ev.AdapterID
		s.LoRAName, s.LoRAID = &name, &id
	}
	b.Events = append(b.Events, Event{Stored: s})
}

func loraName(s *BlockStored) string {
	if s.LoRAName == nil {
		return ""
	}
	return *s.LoRAName
}

// send publishes a batch under the next sequence number and keeps it for
// replays, also when the PUB socket fails it: a subscriber then finds the
// gap in the sequence and replays it.
func (p *Publisher) send(b Batch) {
	b.TS = float64(time.Now().UnixNano()) / 1e9
	payload, err := b.Encode()
	if err != nil {
		p.log.Error("KV events", "err", err)
		return
	}
	seq := p.seq.Add(1) - 1
	var seqBytes [8]byte
	binary.BigEndian.PutUint64(seqBytes[:], seq)
	if err := p.pub.Send(zmq4.NewMsgFrom([]byte(p.opts.Topic), seqBytes[:], payload)); err != nil {
		p.log.Warn("KV events: send", "seq", seq, "err", err)
	}
	p.bufMu.Lock()
	if len(p.buffer) == p.opts.Buffer {
		p.buffer = append(p.buffer[:0], p.buffer[1:]...)
	}
	p.buffer = append(p.buffer, sent{seq, payload})
	p.bufMu.Unlock()
}

// serveReplays answers replay requests until ctx ends.
func (p *Publisher) serveReplays(ctx context.Context) {
	for {
		msg, err := p.replay.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("KV events: replay request", "err", err)
			continue
		}
		// [identity, empty delimiter, start]
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			p.log.Warn("KV events: invalid replay request", "frames", len(msg.Frames))
			continue
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		p.bufMu.Lock()
		var batches []sent
		for _, s := range p.buffer {
			if s.seq >= start {
				batches = append(batches, s)
			}
		}
		p.bufMu.Unlock()
		for _, s := range batches {
			var seq [8]byte
			binary.BigEndian.PutUint64(seq[:], s.seq)
			if err := p.replay.Send(zmq4.NewMsgFrom(id, nil, seq[:], s.payload)); err != nil {
				p.log.Warn("KV events: replay", "err", err)
				break
			}
		}
		if err := p.replay.Send(zmq4.NewMsgFrom(id, nil, endSeq, nil)); err != nil {
			p.log.Warn("KV events: replay end", "err", err)
		}
	}
}

// OffsetEndpoint gives the i-th of several publishers its own endpoint, as
// vLLM does for data-parallel ranks: the TCP port plus i, or an
// "_<i>" suffix for other transports; i = 0 keeps the endpoint.
func OffsetEndpoint(ep string, i int) (string, error) {
	if ep == "" || i == 0 {
		return ep, nil
	}
	if !strings.HasPrefix(ep, "tcp://") {
		return ep + "_" + strconv.Itoa(i), nil
	}
	k := strings.LastIndex(ep, ":")
	port, err := strconv.Atoi(ep[k+1:])
	if err != nil || port == 0 {
		return "", fmt.Errorf("kvevents: %s: the port must be a number to give each model its own", ep)
	}
	return ep[:k+1] + strconv.Itoa(port+i), nil
}
