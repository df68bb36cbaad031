use tooltrust::toolbox;

struct Store;

trait Read {
    fn read(&self, key: String) -> String;
}

#[toolbox]
impl Read for Store {
    /// Reads a key.
    #[tool(trusted, read_only)]
    fn read(&self, key: String) -> String {
        key
    }
}

fn main() {}
