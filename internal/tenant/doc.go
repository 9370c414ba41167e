// Package tenant owns deployment genesis (Init: the provider tenant and the
// root key.issued) and tenants (Create, List, Resolve), all written through
// the chain append path, and every read of oml.tenants other packages make
// (read.go: Refs, IDs, Names, IDByName; one listing, ordered by name).
//
// Invariants:
//   - The provider chain (tenant 00000000-0000-0000-0000-000000000000) opens
//     with key.issued for the deployment key, signed by that key. Init is
//     idempotent for the same key and refuses a different one.
//   - A tenant exists iff the provider chain holds its tenant.created and
//     its own chain opens with tenant.genesis referencing that event by seq
//     and hash; Create writes both in one transaction (provider lock first),
//     so neither can exist without the other.
//   - Tenant names are unique, lowercase [a-z0-9][a-z0-9._-]{0,62}; creating
//     an existing name returns the existing tenant (a natural retry).
package tenant
