use tooltrust::toolbox;

struct Store<T>(T);

#[toolbox]
impl<T: Send + Sync + 'static> Store<T> {
    /// Reads a key.
    #[tool(trusted, read_only)]
    fn read(&self, key: String) -> String {
        key
    }
}

fn main() {}
