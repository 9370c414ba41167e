package chainverify

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// The provider-chain payload fields the verifier reads. They are parsed
// leniently (unknown fields ignored) but every field the checks depend on
// must be present and well formed; a payload that is not is a finding on
// that event, never a panic.

type keyIssuedPayload struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
}

func parseKeyIssued(payload []byte) (id string, pub []byte, err error) {
	var p keyIssuedPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", nil, fmt.Errorf("the key.issued payload is not the expected JSON object: %v", err)
	}
	pub, err = base64.StdEncoding.DecodeString(p.PublicKey)
	if err != nil {
		return "", nil, fmt.Errorf("the key.issued payload's public_key is not base64: %v", err)
	}
	return p.KeyID, pub, nil
}

type keyRevokedPayload struct {
	KeyID string `json:"key_id"`
	Heads []struct {
		TenantID string `json:"tenant_id"`
		Seq      int64  `json:"seq"`
	} `json:"heads"`
}

// parseKeyRevoked reads a key.revoked payload: the key and, per chain, the
// head at the revocation (events of the key above it are findings).
func parseKeyRevoked(payload []byte) (keyID string, cuts map[uuid.UUID]int64, err error) {
	var p keyRevokedPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", nil, fmt.Errorf("the key.revoked payload is not the expected JSON object: %v", err)
	}
	if p.KeyID == "" {
		return "", nil, fmt.Errorf("the key.revoked payload names no key_id")
	}
	cuts = make(map[uuid.UUID]int64, len(p.Heads))
	for _, h := range p.Heads {
		id, err := uuid.Parse(h.TenantID)
		if err != nil {
			return "", nil, fmt.Errorf("the key.revoked payload's head tenant_id %q is not a UUID", h.TenantID)
		}
		cuts[id] = h.Seq
	}
	return p.KeyID, cuts, nil
}

type tenantCreatedPayload struct {
	TenantID string `json:"tenant_id"`
}

func parseTenantCreated(payload []byte) (uuid.UUID, error) {
	var p tenantCreatedPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return uuid.UUID{}, fmt.Errorf("the tenant.created payload is not the expected JSON object: %v", err)
	}
	id, err := uuid.Parse(p.TenantID)
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("the tenant.created payload's tenant_id %q is not a UUID", p.TenantID)
	}
	return id, nil
}

type genesisPayload struct {
	TenantID     string `json:"tenant_id"`
	ProviderSeq  *int64 `json:"provider_seq"`
	ProviderHash string `json:"provider_hash"`
}

// parseGenesis reads a tenant.genesis payload. tenant_id is optional (the
// reference by seq and hash is what binds the chain); when present it must
// name the chain's own tenant.
func parseGenesis(payload []byte, chainTenant uuid.UUID) (seq int64, hash []byte, err error) {
	var p genesisPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return 0, nil, fmt.Errorf("the tenant.genesis payload is not the expected JSON object: %v", err)
	}
	if p.TenantID != "" {
		if id, err := uuid.Parse(p.TenantID); err != nil || id != chainTenant {
			return 0, nil, fmt.Errorf("the tenant.genesis payload names tenant %q, not this chain's tenant", p.TenantID)
		}
	}
	if p.ProviderSeq == nil {
		return 0, nil, fmt.Errorf("the tenant.genesis payload has no provider_seq")
	}
	hash, err = hex.DecodeString(p.ProviderHash)
	if err != nil || len(hash) != 32 {
		return 0, nil, fmt.Errorf("the tenant.genesis payload's provider_hash %q is not a 32-byte hex hash", p.ProviderHash)
	}
	return *p.ProviderSeq, hash, nil
}
