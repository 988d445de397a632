-- Whether a person's decision carried its approver's signature: true or false for a person's
-- decision; NULL for the automation ladder's, a timeout's, and rows written before this
-- migration (their GATE_DECIDED event says it in its metadata).
ALTER TABLE gate_decisions ADD COLUMN signed boolean;
