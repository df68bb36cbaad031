#[derive(tooltrust::ClosedVocabulary)]
enum Nothing {}

fn main() {}
