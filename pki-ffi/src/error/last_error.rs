//! The thread-local last error message.

use std::cell::RefCell;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

pub(super) fn set_last_error(message: String) {
    LAST_ERROR.with(|slot| *slot.borrow_mut() = message);
}

pub(super) fn clear_last_error() {
    LAST_ERROR.with(|slot| slot.borrow_mut().clear());
}

pub(crate) fn with_last_error<T>(f: impl FnOnce(&str) -> T) -> T {
    LAST_ERROR.with(|slot| f(&slot.borrow()))
}
