#[derive(tooltrust::ClosedVocabulary)]
struct Product {
    name: String,
}

fn main() {}
