package server

import (
	"container/list"
	"sync"
)

// The Responses API keeps what it answered (store, true by default), so
// that a request continues a conversation by naming the response it
// follows (previous_response_id) instead of sending it again, and so that
// GET and DELETE /v1/responses/{id} find it. Tessera keeps them in
// memory, per server, within two bounds, dropping the least recently used
// first: a server's memory is the models', and a conversation that goes
// on keeps using its latest response, which is the last one dropped.
//
// Each stored response holds its whole conversation (what the prompt was
// made of, less the instructions, which the API does not carry over, and
// the reply), so that it never depends on another one still being kept.
// A conversation of n turns then holds about n times its length, which
// the byte bound counts; a model's context bounds the length of one.

const (
	// storeCount bounds how many responses a server keeps: enough for
	// every conversation of a busy server's last minutes.
	storeCount = 1000
	// storeBytes bounds their size: the responses and their
	// conversations, as JSON. 1,000 conversations of 16k tokens (64 KiB
	// of text each) fit; it is a sliver of any model's weights.
	storeBytes = 64 << 20
	// storeOverhead is what an entry costs beside its bytes (the map's
	// and the list's entries, the id twice).
	storeOverhead = 256
)

// storedResponse is a response as kept.
type storedResponse struct {
	id string
	// body is the response object, as created and as GET answers it.
	body []byte
	// history is the conversation a following response continues: a JSON
	// array of chat.Message, its input and its reply.
	history []byte
}

func (r *storedResponse) size() int64 {
	return int64(len(r.body)+len(r.history)+2*len(r.id)) + storeOverhead
}

// responseStore is a bounded LRU of responses by id, safe for concurrent
// use.
type responseStore struct {
	maxCount int
	maxBytes int64

	mu    sync.Mutex
	bytes int64
	order *list.List // of *storedResponse, the most recently used first
	byID  map[string]*list.Element
}

func newResponseStore(maxCount int, maxBytes int64) *responseStore {
	return &responseStore{maxCount: maxCount, maxBytes: maxBytes, order: list.New(), byID: map[string]*list.Element{}}
}

// put keeps r, dropping the least recently used responses past the
// bounds. A response larger than the whole store is not kept; put
// reports whether r was.
func (st *responseStore) put(r *storedResponse) bool {
	if r.size() > st.maxBytes {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if e, ok := st.byID[r.id]; ok {
		st.remove(e)
	}
	st.byID[r.id] = st.order.PushFront(r)
	st.bytes += r.size()
	for st.order.Len() > st.maxCount || st.bytes > st.maxBytes {
		st.remove(st.order.Back())
	}
	return true
}

// get returns the response id, which becomes the most recently used.
func (st *responseStore) get(id string) (*storedResponse, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.byID[id]
	if !ok {
		return nil, false
	}
	st.order.MoveToFront(e)
	return e.Value.(*storedResponse), true
}

// delete drops the response id and reports whether it was kept.
func (st *responseStore) delete(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.byID[id]
	if ok {
		st.remove(e)
	}
	return ok
}

func (st *responseStore) remove(e *list.Element) {
	r := st.order.Remove(e).(*storedResponse)
	delete(st.byID, r.id)
	st.bytes -= r.size()
}

// usage is how many responses are kept and their size, for tests.
func (st *responseStore) usage() (int, int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.order.Len(), st.bytes
}
