// An instruction block takes no trust: it is trusted by construction.
use tooltrust::{Id, Instruction, Trust};
use tooltrust::block::Block;

fn main() {
    let _ = Block::instruction(Id::new("b1").unwrap(), Trust::Untrusted, Instruction::new("x"));
}
