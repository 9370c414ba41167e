package keys

import "encoding/hex"

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func hexs(b []byte) string { return hex.EncodeToString(b) }
