// An instruction block takes no trust: it is trusted by construction.
use tooltrust::{Block, Id, Instruction, Trust};

fn main() {
    let _ = Block::instruction(Id::random(), Trust::Untrusted, Instruction::new("x"));
}
