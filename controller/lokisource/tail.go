package lokisource

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// tailReader reads tail messages from a websocket into msgs, which it closes at the
// end with err set.
type tailReader struct {
	conn      *websocket.Conn
	idle      time.Duration
	msgs      chan tailMessage
	ready     chan struct{} // closed at the first ping or message
	done      chan struct{} // closed when the reader ends
	quit      chan struct{}
	err       error
	readyOnce sync.Once
	closeOnce sync.Once
}

// newTailReader reads conn; a message over maxBytes ends it with websocket.ErrReadLimit.
func newTailReader(conn *websocket.Conn, idle time.Duration, maxBytes int64) *tailReader {
	conn.SetReadLimit(maxBytes)
	t := &tailReader{conn: conn, idle: idle, msgs: make(chan tailMessage, 16),
		ready: make(chan struct{}), done: make(chan struct{}), quit: make(chan struct{})}
	conn.SetPingHandler(func(data string) error {
		t.markReady()
		_ = conn.SetReadDeadline(time.Now().Add(idle))
		// Answer like the default handler; a failed pong shows up as a read error.
		_ = conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		return nil
	})
	go t.loop()
	return t
}

func (t *tailReader) markReady() { t.readyOnce.Do(func() { close(t.ready) }) }

func (t *tailReader) loop() {
	defer close(t.done)
	defer close(t.msgs)
	for {
		_ = t.conn.SetReadDeadline(time.Now().Add(t.idle))
		_, b, err := t.conn.ReadMessage()
		if err != nil {
			t.err = fmt.Errorf("loki tail: %w", err)
			return
		}
		var m tailMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.err = fmt.Errorf("loki tail: decode message: %w", err)
			return
		}
		t.markReady()
		select {
		case t.msgs <- m:
		case <-t.quit:
			t.err = errors.New("loki tail: closed")
			return
		}
	}
}

// close ends the connection (politely) and the reader; safe to call more than once.
func (t *tailReader) close() {
	t.closeOnce.Do(func() {
		close(t.quit)
		_ = t.conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = t.conn.Close()
	})
}
