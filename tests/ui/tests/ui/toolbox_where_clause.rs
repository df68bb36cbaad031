use tooltrust::toolbox;

struct Store;

#[toolbox]
impl Store
where
    Self: Sized,
{
    /// Reads a key.
    #[tool(trusted, read_only)]
    fn read(&self, key: String) -> String {
        key
    }
}

fn main() {}
