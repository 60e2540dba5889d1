package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// CreateToken stores a token hash with its name and role; t.CreatedAt is set when zero. A hash that is
// already stored fails with ErrNameTaken.
func (s *bunStore) CreateToken(ctx context.Context, t *Token) error {
	if t.Hash == "" {
		return errors.New("store: create token: hash is required")
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	if t.ID == "" && len(t.Hash) >= 16 {
		t.ID = t.Hash[:16]
	}
	row := &tokenRow{ID: t.ID, Hash: t.Hash, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt.UTC()}
	if t.ExpiresAt != nil {
		e := t.ExpiresAt.UTC()
		row.ExpiresAt = &e
	}
	err := s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(row).Exec(ctx); err != nil {
			if isUniqueViolation(err) {
				return ErrNameTaken
			}
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: create token %q: %w", t.Name, err)
	}
	return nil
}

// GetToken returns the token with that hash.
func (s *bunStore) GetToken(ctx context.Context, hash string) (*Token, error) {
	row := new(tokenRow)
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewSelect().Model(row).Where("hash = ?", hash).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: token", ErrNotFound)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: get token: %w", err)
	}
	return row.toToken(), nil
}

// ListTokens returns every token, oldest first.
func (s *bunStore) ListTokens(ctx context.Context) ([]*Token, error) {
	var rows []tokenRow
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		return tx.NewSelect().Model(&rows).OrderExpr("created_at, id").Scan(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	out := make([]*Token, len(rows))
	for i := range rows {
		out[i] = rows[i].toToken()
	}
	return out, nil
}

// DeleteToken revokes the token with that id.
func (s *bunStore) DeleteToken(ctx context.Context, id string) error {
	err := s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewDelete().Model((*tokenRow)(nil)).Where("id = ?", id).Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: token %q", ErrNotFound, id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: delete token: %w", err)
	}
	return nil
}
