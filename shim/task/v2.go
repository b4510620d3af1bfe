package task

import (
	"context"

	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// registerV2 serves containerd.task.v2.Task, which containerd 1.7 speaks,
// with the v3 service: the two versions' messages are the same on the wire,
// so each request is re-decoded as its v3 twin and each reply back.
func registerV2(server *ttrpc.Server, s *Service) {
	taskv2.RegisterTTRPCTaskService(server, v2{s})
}

type v2 struct{ s *Service }

// bridge re-decodes in as the v3 request, calls f, and re-decodes its reply
// as the v2 response R2.
func bridge[R2 any, PR2 interface {
	*R2
	proto.Message
}, Q3 any, PQ3 interface {
	*Q3
	proto.Message
}, R3 proto.Message](ctx context.Context, in proto.Message, f func(context.Context, PQ3) (R3, error)) (PR2, error) {
	req := PQ3(new(Q3))
	if err := recode(in, req); err != nil {
		return nil, err
	}
	out, err := f(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := PR2(new(R2))
	if err := recode(out, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func recode(from, to proto.Message) error {
	b, err := proto.Marshal(from)
	if err != nil {
		return err
	}
	return proto.Unmarshal(b, to)
}

func (a v2) State(ctx context.Context, r *taskv2.StateRequest) (*taskv2.StateResponse, error) {
	return bridge[taskv2.StateResponse](ctx, r, a.s.State)
}

func (a v2) Create(ctx context.Context, r *taskv2.CreateTaskRequest) (*taskv2.CreateTaskResponse, error) {
	return bridge[taskv2.CreateTaskResponse](ctx, r, a.s.Create)
}

func (a v2) Start(ctx context.Context, r *taskv2.StartRequest) (*taskv2.StartResponse, error) {
	return bridge[taskv2.StartResponse](ctx, r, a.s.Start)
}

func (a v2) Delete(ctx context.Context, r *taskv2.DeleteRequest) (*taskv2.DeleteResponse, error) {
	return bridge[taskv2.DeleteResponse](ctx, r, a.s.Delete)
}

func (a v2) Pids(ctx context.Context, r *taskv2.PidsRequest) (*taskv2.PidsResponse, error) {
	return bridge[taskv2.PidsResponse](ctx, r, a.s.Pids)
}

func (a v2) Pause(ctx context.Context, r *taskv2.PauseRequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.Pause)
}

func (a v2) Resume(ctx context.Context, r *taskv2.ResumeRequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.Resume)
}

func (a v2) Checkpoint(ctx context.Context, r *taskv2.CheckpointTaskRequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.Checkpoint)
}

func (a v2) Kill(ctx context.Context, r *taskv2.KillRequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.Kill)
}

func (a v2) Exec(ctx context.Context, r *taskv2.ExecProcessRequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.Exec)
}

func (a v2) ResizePty(ctx context.Context, r *taskv2.ResizePtyRequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.ResizePty)
}

func (a v2) CloseIO(ctx context.Context, r *taskv2.CloseIORequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.CloseIO)
}

func (a v2) Update(ctx context.Context, r *taskv2.UpdateTaskRequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.Update)
}

func (a v2) Wait(ctx context.Context, r *taskv2.WaitRequest) (*taskv2.WaitResponse, error) {
	return bridge[taskv2.WaitResponse](ctx, r, a.s.Wait)
}

func (a v2) Stats(ctx context.Context, r *taskv2.StatsRequest) (*taskv2.StatsResponse, error) {
	return bridge[taskv2.StatsResponse](ctx, r, a.s.Stats)
}

func (a v2) Connect(ctx context.Context, r *taskv2.ConnectRequest) (*taskv2.ConnectResponse, error) {
	return bridge[taskv2.ConnectResponse](ctx, r, a.s.Connect)
}

func (a v2) Shutdown(ctx context.Context, r *taskv2.ShutdownRequest) (*emptypb.Empty, error) {
	return bridge[emptypb.Empty](ctx, r, a.s.Shutdown)
}

// The generated v2 interface must be fully implemented.
var _ taskv2.TTRPCTaskService = v2{}
