use tooltrust::toolbox;

struct Counter {
    count: u64,
}

#[toolbox]
impl Counter {
    /// Counts a visit.
    #[tool(trusted)]
    fn visit(&mut self) -> u64 {
        self.count += 1;
        self.count
    }
}

fn main() {}
