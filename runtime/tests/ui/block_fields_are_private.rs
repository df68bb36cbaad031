// An untrusted instruction block cannot be built by naming its fields.
use tooltrust::{Block, Id, OutputKind, Trust};

fn main() {
    let _ = Block {
        id: Id::random(),
        trust: Trust::Untrusted,
        kind: OutputKind::Instruction,
    };
}
