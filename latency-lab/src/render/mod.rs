//! The render layer: turns the model's values into text, HTML, plots and files. Reads
//! [`crate::model`]; never measures (the bench layer does) and never feeds back into it.
pub mod compare;
pub mod fanout;
pub mod files;
pub mod html;
pub mod plot;
pub mod text;
