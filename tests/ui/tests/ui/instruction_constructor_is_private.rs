// Neither the tuple constructor nor the crate's own vector constructor is public.
use std::borrow::Cow;
use tooltrust::Instruction;

fn main() {
    let _ = Instruction(Cow::Owned(String::from("x")));
    let _ = Instruction::developer_authored(String::from("x"));
}
