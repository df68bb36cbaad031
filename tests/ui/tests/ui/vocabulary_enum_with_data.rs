#[derive(tooltrust::ClosedVocabulary)]
enum Product {
    Kettle,
    Custom(String),
}

fn main() {}
