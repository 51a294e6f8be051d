# Lobsters-like models over the schema tests/rails/migrate builds.
class ApplicationRecord < ActiveRecord::Base
  self.abstract_class = true
end

class User < ApplicationRecord
  # MariaDB stores JSON as LONGTEXT; declaring the attribute makes both
  # servers hand back a Hash, as a Rails application on MariaDB does.
  attribute :settings, :json
  has_many :stories, dependent: :destroy
  has_many :comments
  has_many :votes
  has_many :voted_stories, through: :votes, source: :story
  has_many :story_hides
  validates :username, presence: true, uniqueness: true, length: { maximum: 50 }
  scope :admins, -> { where(is_admin: true) }
end

class Story < ApplicationRecord
  belongs_to :user, counter_cache: true
  has_many :comments, dependent: :destroy
  has_many :votes, dependent: :delete_all
  has_many :taggings, dependent: :destroy
  has_many :tags, through: :taggings
  validates :title, presence: true
  scope :visible, -> { where(is_deleted: false) }
  scope :hottest, -> { visible.order(hotness: :desc, id: :asc) }
end

class Comment < ApplicationRecord
  belongs_to :story, counter_cache: true
  belongs_to :user, counter_cache: true
  belongs_to :parent_comment, class_name: "Comment", optional: true
  has_many :replies, class_name: "Comment", foreign_key: :parent_comment_id
end

class Vote < ApplicationRecord
  belongs_to :user
  belongs_to :story
  enum vote: { down: -1, up: 1 }
end

class Tag < ApplicationRecord
  has_many :taggings
  has_many :stories, through: :taggings
end

class Tagging < ApplicationRecord
  belongs_to :story
  belongs_to :tag, counter_cache: true
end

class StoryHide < ApplicationRecord
  belongs_to :user
  belongs_to :story
end

class Message < ApplicationRecord
  belongs_to :author, class_name: "User"
  belongs_to :recipient, class_name: "User"
end

class User
  has_many :sent_messages, class_name: "Message", foreign_key: :author_id
  has_and_belongs_to_many :saved_stories, class_name: "Story", join_table: :saved_stories
  store_accessor :settings, :theme
end
