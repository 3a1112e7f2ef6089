package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// Decode reads a batch as vLLM's consumers do (llm-d's kv-cache adapter,
// Dynamo's): an array [ts, events, rank?] whose events are maps tagged by
// "type" or, as vLLM sent them before v0.24, arrays [tag, fields...].
func Decode(payload []byte) (Batch, error) {
	var raw []any
	if err := msgpack.Unmarshal(payload, &raw); err != nil {
		return Batch{}, fmt.Errorf("kvevents: decode a batch: %w", err)
	}
	if len(raw) < 2 {
		return Batch{}, fmt.Errorf("kvevents: a batch of %d fields", len(raw))
	}
	var b Batch
	ts, ok := raw[0].(float64)
	evs, ok2 := raw[1].([]any)
	if !ok || !ok2 {
		return Batch{}, fmt.Errorf("kvevents: a batch of %T, %T", raw[0], raw[1])
	}
	b.TS = ts
	for i, e := range evs {
		ev, err := decodeEvent(e)
		if err != nil {
			return Batch{}, fmt.Errorf("kvevents: event %d: %w", i, err)
		}
		b.Events = append(b.Events, ev)
	}
	return b, nil
}

// fieldNames are the events' fields in declaration order, which is the
// order of the legacy array encoding after the tag.
var fieldNames = map[string][]string{
	"BlockStored":      {"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"},
	"BlockRemoved":     {"block_hashes", "medium"},
	"AllBlocksCleared": nil,
}

func decodeEvent(e any) (Event, error) {
	fields := map[string]any{}
	var tag string
	switch v := e.(type) {
	case map[string]any:
		tag, _ = v["type"].(string)
		fields = v
	case []any:
		if len(v) > 0 {
			tag, _ = v[0].(string)
		}
		for i, name := range fieldNames[tag] {
			if i+1 < len(v) {
				fields[name] = v[i+1]
			}
		}
	default:
		return Event{}, fmt.Errorf("an event of %T", e)
	}
	switch tag {
	case "AllBlocksCleared":
		return Event{Cleared: true}, nil
	case "BlockRemoved":
		hashes, err := uints(fields["block_hashes"])
		medium, _ := fields["medium"].(string)
		return Event{Removed: &BlockRemoved{BlockHashes: hashes, Medium: medium}}, err
	case "BlockStored":
		s := &BlockStored{}
		var errs []error
		var err error
		s.BlockHashes, err = uints(fields["block_hashes"])
		errs = append(errs, err)
		if p := fields["parent_block_hash"]; p != nil {
			h, err := toUint(p)
			s.ParentHash = &h
			errs = append(errs, err)
		}
		tokens, err := uints(fields["token_ids"])
		errs = append(errs, err)
		for _, t := range tokens {
			s.TokenIDs = append(s.TokenIDs, int32(t))
		}
		bs, err := toUint(fields["block_size"])
		s.BlockSize = int(bs)
		errs = append(errs, err)
		if id := fields["lora_id"]; id != nil {
			v, err := toUint(id)
			s.LoRAID = &v
			errs = append(errs, err)
		}
		s.Medium, _ = fields["medium"].(string)
		if name, ok := fields["lora_name"].(string); ok {
			s.LoRAName = &name
		}
		return Event{Stored: s}, errors.Join(errs...)
	}
	return Event{}, fmt.Errorf("unknown event %q", tag)
}

func uints(v any) ([]uint64, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want a list, got %T", v)
	}
	out := make([]uint64, len(list))
	for i, x := range list {
		var err error
		if out[i], err = toUint(x); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// toUint reads an integer as msgpack decodes it into an interface, or a
// hash sent as bytes (vLLM's full digests): their last 8, big-endian, as
// llm-d's indexer reads them.
func toUint(v any) (uint64, error) {
	switch x := v.(type) {
	case uint64:
		return x, nil
	case uint32:
		return uint64(x), nil
	case uint16:
		return uint64(x), nil
	case uint8:
		return uint64(x), nil
	case int64:
		return uint64(x), nil
	case int32:
		return uint64(x), nil
	case int16:
		return uint64(x), nil
	case int8:
		return uint64(x), nil
	case []byte:
		var b [8]byte
		copy(b[max(0, 8-len(x)):], x[max(0, len(x)-8):])
		return binary.BigEndian.Uint64(b[:]), nil
	}
	return 0, fmt.Errorf("want an integer, got %T", v)
}

// subscriber receives a publisher's batches in sequence order, each once:
// from a SUB socket, replaying through the publisher's ROUTER socket
// what a gap in the sequence numbers shows it missed, from 0 at the start
// (ZeroMQ drops what a PUB socket sends before a subscription arrives),
// and after a second without messages (in case the last ones were lost).
type subscriber struct {
	sub, replay zmq4.Socket
	next        uint64 // the next sequence number to hand over
}

// ReplayIdle is how long Subscribe waits without messages before it
// asks for a replay.
const ReplayIdle = time.Second

// Subscribe connects to a publisher's endpoint and replay endpoint,
// subscribed to topics starting with prefix, and calls fn with each batch
// in order until ctx ends or fn fails. (A replay does not say the topic:
// one Subscribe follows one publisher.)
func Subscribe(ctx context.Context, endpoint, replay, prefix string, fn func(seq uint64, b Batch) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &subscriber{sub: zmq4.NewSub(ctx), replay: zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("tessera-"+strconv.FormatInt(time.Now().UnixNano(), 36))))}
	defer s.sub.Close()
	defer s.replay.Close()
	if err := s.sub.Dial(endpoint); err != nil {
		return fmt.Errorf("kvevents: subscribe to %s: %w", endpoint, err)
	}
	if err := s.sub.SetOption(zmq4.OptionSubscribe, prefix); err != nil {
		return err
	}
	if err := s.replay.Dial(replay); err != nil {
		return fmt.Errorf("kvevents: replay from %s: %w", replay, err)
	}
	msgs := make(chan zmq4.Msg)
	go func() {
		for {
			m, err := s.sub.Recv()
			if err != nil {
				cancel()
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	deliver := func(seq uint64, payload []byte) error {
		if seq != s.next {
			return nil // already handed over (or not yet: a replay fills it)
		}
		b, err := Decode(payload)
		if err != nil {
			return err
		}
		s.next++
		return fn(seq, b)
	}
	if err := s.catchUp(ctx, deliver); err != nil {
		return err
	}
	idle := time.NewTimer(ReplayIdle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle.C:
			if err := s.catchUp(ctx, deliver); err != nil {
				return err
			}
		case m := <-msgs:
			if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
				continue
			}
			seq := binary.BigEndian.Uint64(m.Frames[1])
			if seq > s.next {
				if err := s.catchUp(ctx, deliver); err != nil {
					return err
				}
			}
			if err := deliver(seq, m.Frames[2]); err != nil {
				return err
			}
		}
		idle.Reset(ReplayIdle)
	}
}

// catchUp asks for every batch from the next one on and hands them over.
func (s *subscriber) catchUp(ctx context.Context, deliver func(uint64, []byte) error) error {
	var start [8]byte
	binary.BigEndian.PutUint64(start[:], s.next)
	if err := s.replay.Send(zmq4.NewMsgFrom(nil, start[:])); err != nil {
		return fmt.Errorf("kvevents: replay request: %w", err)
	}
	for {
		m, err := s.replay.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("kvevents: replay: %w", err)
		}
		// [empty delimiter, seq, payload]
		if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
			return fmt.Errorf("kvevents: a replay answer of %d frames", len(m.Frames))
		}
		if string(m.Frames[1]) == string(endSeq) {
			return nil
		}
		if err := deliver(binary.BigEndian.Uint64(m.Frames[1]), m.Frames[2]); err != nil {
			return err
		}
	}
}
