package webhooks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeyEnv names the environment variable that holds the key encrypting the
// stored webhook secrets: 32 bytes, as base64 or hex (e.g. `openssl rand
// -base64 32`).
const KeyEnv = "TIDEMARK_WEBHOOK_KEY"

// ErrNoKey means KeyEnv is not set.
var ErrNoKey = errors.New(KeyEnv + " is not set: set it to 32 random bytes, base64 or hex (openssl rand -base64 32)")

// Sealer encrypts and decrypts webhook secrets with AES-256-GCM (the
// standard library's: authenticated, so a tampered row fails to open
// instead of yielding a wrong secret).
type Sealer struct{ aead cipher.AEAD }

// SealerFromEnv reads the key from KeyEnv.
func SealerFromEnv() (*Sealer, error) {
	v, ok := os.LookupEnv(KeyEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return nil, ErrNoKey
	}
	return NewSealer(strings.TrimSpace(v))
}

// NewSealer makes a Sealer from a 32-byte key written as base64 or hex.
func NewSealer(encoded string) (*Sealer, error) {
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(key) != 32 {
		if k, herr := hex.DecodeString(encoded); herr == nil {
			key, err = k, nil
		}
	}
	if err != nil || len(key) != 32 {
		// Never echo the value: it is the key.
		return nil, fmt.Errorf("%s: want 32 bytes as base64 or hex (got %d bytes)", KeyEnv, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyEnv, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyEnv, err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal returns nonce || ciphertext of secret.
func (s *Sealer) Seal(secret string) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return s.aead.Seal(nonce, nonce, []byte(secret), nil)
}

// Open decrypts what Seal made.
func (s *Sealer) Open(sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("sealed secret too short")
	}
	b, err := s.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return "", fmt.Errorf("cannot decrypt a stored webhook secret (was %s changed?): %w", KeyEnv, err)
	}
	return string(b), nil
}

// NewSecret returns a random signing secret for a new subscription.
func NewSecret() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
