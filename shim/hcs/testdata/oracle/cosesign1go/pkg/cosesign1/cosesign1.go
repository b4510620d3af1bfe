// Package cosesign1 stands in for github.com/Microsoft/cosesign1go, which
// the Go module proxy does not serve, in the hcsshim copy that runs
// runhcs's document builder as winproc's oracle. hcsshim's
// pkg/securitypolicy needs it to compile; it checks the signed security
// policy fragments of confidential utility VMs, which the builder of a
// process-isolated container never calls. Everything here fails.
package cosesign1

import (
	"crypto"
	"errors"
)

// COSE_Header_CWTClaims is the protected header label of CWT claims.
const COSE_Header_CWTClaims = 15 //nolint:revive // the real package's name

// ParsedCOSEReceipt is a transparency receipt.
type ParsedCOSEReceipt struct{}

// UnpackedCoseSign1 is an unpacked COSE_Sign1 envelope.
type UnpackedCoseSign1 struct {
	Protected   map[any]any
	Payload     []byte
	Issuer      string
	Feed        string
	ChainPem    string
	ContentType string
	Receipts    []ParsedCOSEReceipt
}

var errStub = errors.New("cosesign1: not available in winproc's oracle build")

// UnpackAndValidateCOSE1CertChain fails.
func UnpackAndValidateCOSE1CertChain(raw []byte) (*UnpackedCoseSign1, error) {
	return nil, errStub
}

// ParseTTLPayload fails.
func ParseTTLPayload(payload []byte) (map[string]map[string]crypto.PublicKey, error) {
	return nil, errStub
}
