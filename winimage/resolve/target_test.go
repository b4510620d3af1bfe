package resolve

import (
	"context"
	"testing"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	apitypes "github.com/containerd/containerd/api/types"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// imagesServer answers the images API's Get from a map, at the gRPC seam.
type imagesServer map[string]*imagesapi.Image

func (s imagesServer) Invoke(_ context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	if method != "/containerd.services.images.v1.Images/Get" {
		return status.Errorf(codes.Unimplemented, "%s", method)
	}
	img, ok := s[args.(*imagesapi.GetImageRequest).GetName()]
	if !ok {
		return status.Error(codes.NotFound, "image not found")
	}
	proto.Merge(reply.(*imagesapi.GetImageResponse), &imagesapi.GetImageResponse{Image: img})
	return nil
}

func (imagesServer) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "no streams")
}

func TestTarget(t *testing.T) {
	d := digest.FromString("index")
	conn := imagesServer{"pause:3.10": {Name: "pause:3.10", Target: &apitypes.Descriptor{
		MediaType: ocispec.MediaTypeImageIndex, Digest: d.String(), Size: 42, Annotations: map[string]string{"a": "b"},
	}}}
	got, err := Target(context.Background(), conn, "pause:3.10")
	if err != nil {
		t.Fatal(err)
	}
	if got.MediaType != ocispec.MediaTypeImageIndex || got.Digest != d || got.Size != 42 || got.Annotations["a"] != "b" {
		t.Errorf("Target = %+v", got)
	}
	if _, err := Target(context.Background(), conn, "missing"); !errdefs.IsNotFound(err) {
		t.Errorf("Target of a missing image = %v, want not found", err)
	}
}
