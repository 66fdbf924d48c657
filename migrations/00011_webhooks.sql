-- +goose Up
-- Provider webhooks (issue 14): the subscriptions `tidemark webhooks register`
-- made, the inbound key store, the conflicts for a person, and the triggers
-- the owning daemon turns into targeted passes.
CREATE TABLE webhook_subscriptions (
    source           text NOT NULL,
    subscription_id  text NOT NULL,
    url              text NOT NULL,
    events           text[] NOT NULL,
    secret_enc       bytea NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    validated_at     timestamptz,
    last_delivery_at timestamptz,
    deliveries       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (source, subscription_id)
);
COMMENT ON TABLE webhook_subscriptions IS 'Provider webhook subscriptions made by tidemark webhooks register; the secret is AES-GCM encrypted with TIDEMARK_WEBHOOK_KEY.';
COMMENT ON COLUMN webhook_subscriptions.secret_enc IS 'nonce || AES-256-GCM ciphertext of the signing secret (Toggl) or token (Clockify); never stored in clear.';
COMMENT ON COLUMN webhook_subscriptions.last_delivery_at IS 'When the last delivery with a valid signature for this subscription arrived.';

CREATE TABLE webhook_events (
    source        text NOT NULL,
    key           text NOT NULL,
    resource      text NOT NULL,
    first_seen_at timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    payload_hash  bytea NOT NULL,
    outcome       text NOT NULL,
    PRIMARY KEY (source, key)
);
COMMENT ON TABLE webhook_events IS 'The inbound key store: one row per provider event key; insert first, the primary key refuses a repeat. first_seen_at is never refreshed by a repeat.';
COMMENT ON COLUMN webhook_events.key IS 'The provider''s stable event id (Toggl event_id), or a key derived from the change: event type, entity id and update stamp (content hash when the body has no stamp).';
COMMENT ON COLUMN webhook_events.payload_hash IS 'SHA-256 of the payload in canonical JSON: a repeat with another hash is a conflict.';
COMMENT ON COLUMN webhook_events.outcome IS 'accepted (a pass was triggered), expired_replay (seen again after expires_at: triggered again) or ignored (a resource not mirrored).';
CREATE INDEX webhook_events_expires ON webhook_events (expires_at);

CREATE TABLE webhook_conflicts (
    id            bigserial PRIMARY KEY,
    source        text NOT NULL,
    key           text NOT NULL,
    seen_at       timestamptz NOT NULL,
    stored_hash   bytea NOT NULL,
    received_hash bytea NOT NULL
);
COMMENT ON TABLE webhook_conflicts IS 'Deliveries whose payload differed from the one stored under the same key: never processed, never written over; for a person to look at (tidemark webhooks conflicts).';

CREATE TABLE webhook_triggers (
    source         text NOT NULL,
    resource       text NOT NULL,
    seq            bigint NOT NULL DEFAULT 1,
    events         bigint NOT NULL DEFAULT 1,
    first_event_at timestamptz NOT NULL,
    PRIMARY KEY (source, resource)
);
COMMENT ON TABLE webhook_triggers IS 'Pending targeted passes: one row per source and resource however many events arrived (a burst coalesces); the owning daemon runs a pass and deletes the row only if no event came meanwhile (seq unchanged).';
COMMENT ON COLUMN webhook_triggers.first_event_at IS 'When the oldest event still waiting for a pass arrived (event-to-row latency).';

-- +goose Down
DROP TABLE webhook_triggers;
DROP TABLE webhook_conflicts;
DROP TABLE webhook_events;
DROP TABLE webhook_subscriptions;
