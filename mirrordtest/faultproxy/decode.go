package faultproxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsKey answers with a header that is never flexible.
const apiVersionsKey = 18

// ErrResponse is a response the proxy cannot decode.
var ErrResponse = errors.New("faultproxy: response")

// Decode decodes the exchange's response with kmsg (Kafka's own API keys;
// nil and no error for another key). The result aliases Response: use it
// within the Observe call.
func (e Exchange) Decode() (kmsg.Response, error) {
	req := kmsg.RequestForKey(e.APIKey)
	if req == nil {
		return nil, nil
	}
	resp := req.ResponseKind()
	resp.SetVersion(e.APIVersion)
	body := e.Response[4:] // after the correlation ID
	if resp.IsFlexible() && e.APIKey != apiVersionsKey {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: key %d version %d: %v", ErrResponse, e.APIKey, e.APIVersion, err)
	}
	return resp, nil
}

// skipTags skips a header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad tagged fields in the header", ErrResponse)
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, fmt.Errorf("%w: bad tag in the header", ErrResponse)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return nil, fmt.Errorf("%w: bad tag size in the header", ErrResponse)
		}
		b = b[n+int(size):]
	}
	return b, nil
}
