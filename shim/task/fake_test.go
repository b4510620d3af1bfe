package task

import (
	"context"
	"sync"

	"github.com/containerd/containerd/v2/core/events"
)

// recorder is the event publisher: it keeps the topics in order.
type recorder struct {
	mu     sync.Mutex
	topics []string
}

func (r *recorder) Publish(_ context.Context, topic string, _ events.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.topics = append(r.topics, topic)
	return nil
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.topics...)
}

// shutdownRecorder is the shim's shutdown service.
type shutdownRecorder struct {
	mu   sync.Mutex
	done bool
}

func (s *shutdownRecorder) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
}
func (s *shutdownRecorder) RegisterCallback(func(context.Context) error) {}
func (s *shutdownRecorder) Done() <-chan struct{}                        { return nil }
func (s *shutdownRecorder) Err() error                                   { return nil }
