use tooltrust::toolbox;

struct Mailer;

#[toolbox]
impl Mailer {
    fn helper(&self) -> u32 {
        1
    }
}

fn main() {}
