package lakewriter

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
)

// Which deployment a lake belongs to: the record at its root.

// DeploymentKey is the object at the lake root that names the deployment
// the lake belongs to. Written once, put-if-absent, by the lake writer.
const DeploymentKey = "_oml_deployment.json"

// Deployment identifies a deployment by its provider chain's genesis: the
// root key.issued event (provider seq 1) and the key that signed it.
type Deployment struct {
	Format              int    `json:"format"`
	ProviderGenesisHash string `json:"provider_genesis_hash"`
	RootKeyID           string `json:"root_key_id"`
	// SystemIdentifier is the database cluster the record was first written
	// from (informational: a logical dump and restore changes it).
	SystemIdentifier string `json:"system_identifier,omitempty"`
}

// databaseDeployment reads the database's deployment identity; ok is false
// before `oml init` made the provider chain.
func databaseDeployment(ctx context.Context, db rowQuerier) (Deployment, bool, error) {
	var d Deployment
	h, keyID, err := journal.ProviderGenesis(ctx, db)
	d.RootKeyID = keyID
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("read the provider chain's genesis: %w", err)
	}
	d.Format, d.ProviderGenesisHash = 1, hex.EncodeToString(h)
	return d, true, nil
}

// ReadDeployment reads the lake's deployment record (nil if there is none).
func ReadDeployment(ctx context.Context, lake store.Store) (*Deployment, error) {
	b, err := lake.Get(ctx, DeploymentKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the lake's deployment record %s: %w", DeploymentKey, err)
	}
	var d Deployment
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("the lake's deployment record %s is not valid JSON (%v); it was not written by oml", DeploymentKey, err)
	}
	return &d, nil
}

// checkDeployment compares the lake's deployment record with the
// database's; bad says how they differ ("" when they agree or either is
// missing).
func checkDeployment(ctx context.Context, db rowQuerier, lake store.Store) (*Deployment, string, error) {
	if lake == nil {
		return nil, "", nil
	}
	rec, err := ReadDeployment(ctx, lake)
	if err != nil || rec == nil {
		return rec, "", err
	}
	mine, ok, err := databaseDeployment(ctx, db)
	if err != nil || !ok {
		return rec, "", err
	}
	if rec.ProviderGenesisHash != mine.ProviderGenesisHash || rec.RootKeyID != mine.RootKeyID {
		return rec, fmt.Sprintf("its %s names provider genesis %.16s… (root key %s), the database's is %.16s… (root key %s)",
			DeploymentKey, rec.ProviderGenesisHash, rec.RootKeyID, mine.ProviderGenesisHash, mine.RootKeyID), nil
	}
	return rec, "", nil
}

// ensureDeployment writes the lake's deployment record if it has none
// (put-if-absent: two writers racing write one record). Only the writer
// calls it; read-only commands never create it.
func ensureDeployment(ctx context.Context, db rowQuerier, lake store.Store, id Identity) error {
	mine, ok, err := databaseDeployment(ctx, db)
	if err != nil || !ok {
		return err
	}
	if rec, err := ReadDeployment(ctx, lake); err != nil || rec != nil {
		return err
	}
	mine.SystemIdentifier = id.SystemIdentifier
	b, err := json.MarshalIndent(mine, "", "  ")
	if err != nil {
		return err
	}
	err = lake.PutIfAbsent(ctx, DeploymentKey, append(b, '\n'))
	if errors.Is(err, store.ErrExists) {
		return nil // another writer won; the next check compares it
	}
	if err != nil {
		return fmt.Errorf("write the lake's deployment record %s: %w", DeploymentKey, err)
	}
	return nil
}
